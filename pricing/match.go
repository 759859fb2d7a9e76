package pricing

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// matchExpr is a genai-prices match expression (equals, starts_with, ends_with, contains,
// regex, or, and), evaluated as the dataset's own calculator does: the literal forms
// compare case-insensitively, a regex is matched as written against the lower-cased id.
type matchExpr struct {
	op    string // equals, starts_with, ends_with, contains, regex, or, and
	lit   string // lower-cased literal
	re    *regexp.Regexp
	notRe *regexp.Regexp // a leading negative lookahead: the id must not match this
	subs  []*matchExpr
}

// parseMatch compiles a match expression; errors name the offending part.
func parseMatch(raw json.RawMessage) (*matchExpr, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("must be an object with one of equals, starts_with, ends_with, contains, regex, or, and: %w", err)
	}
	if len(obj) != 1 {
		return nil, fmt.Errorf("must have exactly one key, got %d", len(obj))
	}
	for op, v := range obj {
		m := &matchExpr{op: op}
		switch op {
		case "or", "and":
			var list []json.RawMessage
			if err := json.Unmarshal(v, &list); err != nil {
				return nil, fmt.Errorf("%s must be a list: %w", op, err)
			}
			for i, e := range list {
				sub, err := parseMatch(e)
				if err != nil {
					return nil, fmt.Errorf("%s[%d]: %w", op, i, err)
				}
				m.subs = append(m.subs, sub)
			}
		case "equals", "starts_with", "ends_with", "contains", "regex":
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return nil, fmt.Errorf("%s must be a string: %w", op, err)
			}
			if op == "regex" {
				var err error
				if m.re, m.notRe, err = compileJSRegex(s); err != nil {
					return nil, fmt.Errorf("regex %q: %w", s, err)
				}
			} else {
				m.lit = strings.ToLower(s)
			}
		default:
			return nil, fmt.Errorf("unknown match operator %q", op)
		}
		return m, nil
	}
	return nil, errors.New("empty match") // unreachable: len(obj) == 1
}

// compileJSRegex compiles a JavaScript regex. Go's engine has no lookahead; the one form
// the dataset uses, a leading negative lookahead "^(?!A)B", is kept as two expressions:
// the id must not match ^A and must match ^B.
func compileJSRegex(s string) (re, notRe *regexp.Regexp, err error) {
	if re, err = regexp.Compile(s); err == nil {
		return re, nil, nil
	}
	if strings.HasPrefix(s, "^(?!") {
		if end := closingParen(s, 1); end > 0 {
			notRe, err1 := regexp.Compile("^(?:" + s[4:end] + ")")
			re, err2 := regexp.Compile("^(?:" + s[end+1:] + ")")
			if err1 == nil && err2 == nil {
				return re, notRe, nil
			}
		}
	}
	return nil, nil, err
}

// closingParen returns the index of the parenthesis closing the one at open, or -1.
func closingParen(s string, open int) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// matches reports whether the lower-cased id s matches.
func (m *matchExpr) matches(s string) bool {
	switch m.op {
	case "or":
		for _, e := range m.subs {
			if e.matches(s) {
				return true
			}
		}
		return false
	case "and":
		for _, e := range m.subs {
			if !e.matches(s) {
				return false
			}
		}
		return true
	case "equals":
		return s == m.lit
	case "starts_with":
		return strings.HasPrefix(s, m.lit)
	case "ends_with":
		return strings.HasSuffix(s, m.lit)
	case "contains":
		return strings.Contains(s, m.lit)
	case "regex":
		return (m.notRe == nil || !m.notRe.MatchString(s)) && m.re.MatchString(s)
	}
	return false
}
