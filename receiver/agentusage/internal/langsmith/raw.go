package langsmith

import (
	"sort"
	"strconv"

	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/rawjson"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/record"
)

// Readers of values the decoder kept as slices of a checked body.

// validObject reports whether raw is exactly one JSON object (space around it
// allowed).
func validObject(raw []byte) bool {
	return rawjson.IsObject(rawjson.TrimSpace(raw)) && rawjson.Validate(raw) == nil
}

// rawField is one member of a scanned object: its key (decoded) and raw value.
type rawField struct {
	key string
	val []byte
}

// sortedFields returns the members of a validated object as a decoded map would
// iterate them in sorted key order: sorted by key, the last of duplicates kept.
func sortedFields(obj []byte) []rawField {
	var fs []rawField
	noDoc.Fields(obj, func(k, v []byte) bool {
		fs = append(fs, rawField{string(k), v})
		return true
	})
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].key < fs[j].key })
	out := fs[:0]
	for i, f := range fs {
		if i+1 < len(fs) && fs[i+1].key == f.key {
			continue
		}
		out = append(out, f)
	}
	return out
}

// rawScalar turns a scalar the way encoding/json decodes it into an interface value
// (numbers as float64), for record.Count.
func rawScalar(raw []byte) any {
	if len(raw) == 0 {
		return nil
	}
	switch raw[0] {
	case '"':
		s, _ := rawjson.String(raw)
		return s
	case '{', '[', 't', 'f', 'n':
		return nil
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return nil
	}
	return f
}

// rawCount is record.Count of a raw scalar: a token count given as a number or a
// numeric string. Plain non-negative integers, the usual case, are read without
// boxing them into an interface value.
func rawCount(raw []byte) (int64, bool) {
	if n := len(raw); n > 0 && n <= 18 {
		var v int64
		plain := true
		for _, c := range raw {
			if c < '0' || c > '9' {
				plain = false
				break
			}
			v = v*10 + int64(c-'0')
		}
		if plain && (raw[0] != '0' || n == 1) {
			return v, true
		}
	}
	return record.Count(rawScalar(raw))
}

// noDoc reads kept values with internal/rawjson's readers. A run outlives the document
// it was read from (it may be parked, stored, merged with a later PATCH), so its
// values are walked without the document's index of container ends: the readers skip
// nested values themselves.
var noDoc *rawjson.Doc
