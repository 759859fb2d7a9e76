package config

import "regexp"

var notFound = regexp.MustCompile(`^(line \d+): field (\S+) not found in type \S+$`)

// rewriteUnknown turns yaml.v3's "line 4: field foo not found in type config.Model" into
// "line 4: unknown key \"foo\"".
func rewriteUnknown(msg string) string {
	if m := notFound.FindStringSubmatch(msg); m != nil {
		return m[1] + `: unknown key "` + m[2] + `"`
	}
	return msg
}
