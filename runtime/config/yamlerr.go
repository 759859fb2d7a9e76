package config

import (
	"regexp"
	"strconv"
)

var (
	notFound = regexp.MustCompile(`^line (\d+): field (\S+) not found in type \S+$`)
	lineNum  = regexp.MustCompile(`^line (\d+):`)
)

// rewriteUnknown turns yaml.v3's "line 4: field foo not found in type config.Model" into
// "line 4: unknown key \"foo\"", shifting line numbers by offset.
func rewriteUnknown(msg string, offset int) string {
	if m := notFound.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return "line " + strconv.Itoa(n+offset) + `: unknown key "` + m[2] + `"`
	}
	if m := lineNum.FindStringSubmatch(msg); m != nil && offset != 0 {
		n, _ := strconv.Atoi(m[1])
		return "line " + strconv.Itoa(n+offset) + msg[len(m[0])-1:]
	}
	return msg
}
