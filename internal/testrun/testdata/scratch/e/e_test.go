package e

import (
	"fmt"
	"os"
	"testing"
)

func TestMain(m *testing.M) { fmt.Println("skipping all: no ollama"); os.Exit(0) }
func TestY(t *testing.T)    {}
