package genai

import "strings"

// Caller buckets: agentmeter.caller is "lead_agent", "subagent:<name>" or
// "middleware:<name>" (DeerFlow's caller tags); the bucket is the part before the colon.
const (
	BucketLeadAgent  = "lead_agent"
	BucketSubagent   = "subagent"
	BucketMiddleware = "middleware"
)

// SubagentCaller is the caller tag of a subagent's model calls.
func SubagentCaller(name string) string { return BucketSubagent + ":" + name }

// MiddlewareCaller is the caller tag of a middleware's own model calls.
func MiddlewareCaller(name string) string { return BucketMiddleware + ":" + name }

// CallerBucket maps a caller tag to its bucket. Unknown or empty tags count as the lead
// agent, as DeerFlow's journal does for untagged calls.
func CallerBucket(caller string) string {
	head, _, _ := strings.Cut(caller, ":")
	switch head {
	case BucketSubagent, BucketMiddleware:
		return head
	default:
		return BucketLeadAgent
	}
}

// CallerFromTags applies the caller rule for tagged runs: the first tag
// that is lead_agent or starts with subagent: or middleware: is the caller.
func CallerFromTags(tags []string) string {
	for _, t := range tags {
		if t == BucketLeadAgent || strings.HasPrefix(t, BucketSubagent+":") || strings.HasPrefix(t, BucketMiddleware+":") {
			return t
		}
	}
	return ""
}
