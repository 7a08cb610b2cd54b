package redact

import "testing"

func TestURL(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain", "http://127.0.0.1:11434", "http://127.0.0.1:11434"},
		{"password", "http://user:PASSWORD@host:8000/v1", "http://user:***@host:8000/v1"},
		{"query key", "https://api.example/v1?api_key=SECRET&x=1", "https://api.example/v1?api_key=***&x=***"},
		{"not a url", "no url here", "no url here"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := URL(tt.in); got != tt.want {
				t.Errorf("URL(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestText(t *testing.T) {
	tests := []struct {
		name, in string
		keys     []string
		want     string
	}{
		{"bearer", `{"error":"invalid token Bearer sk-abcdef123456"}`, nil, `{"error":"invalid token Bearer ***"}`},
		{"lower bearer", "authorization: bearer abc.def", nil, "authorization: bearer ***"},
		{"sk key", "key sk-proj-ABCDEFGH is wrong", nil, "key sk-*** is wrong"},
		{"configured key", "got key hunter2-secret back", []string{"hunter2-secret"}, "got key *** back"},
		{"url in error", `Post "http://u:p@h/v1/chat?key=K": dial tcp`, nil, `Post "http://u:***@h/v1/chat?key=***": dial tcp`},
		{"nothing", "connection refused", nil, "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Text(tt.in, tt.keys...); got != tt.want {
				t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
