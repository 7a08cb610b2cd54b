package antiloop

import "github.com/cespare/xxhash/v2"

// Signature identifies a tool call by what it does, not by how it was
// written: the xxhash64 of name, a zero byte, and the [Canonical] form of
// args. Calls whose arguments differ only in key order, whitespace or number
// spelling have the same signature. Arguments that are not valid JSON return
// an error wrapping [ErrInvalidJSON]; the caller reports them to the model as
// a format error.
//
// Call IDs are never part of a signature: some backends make them up per call.
func Signature(name string, args []byte) (uint64, error) {
	c := getCanon()
	defer putCanon(c)
	buf := append(c.out[:0], name...)
	buf = append(buf, 0)
	buf, err := c.run(buf, args)
	c.out = buf
	if err != nil {
		return 0, err
	}
	return xxhash.Sum64(buf), nil
}

// Hash is the signature of a call whose identity bytes (name, a zero byte,
// canonical normalised arguments) the tool already built: tools that know
// what their arguments mean (a path resolved in the sandbox, a default
// filled in) key a call more precisely than [Signature] can.
func Hash(identity []byte) uint64 { return xxhash.Sum64(identity) }
