package genainormalize

import "strings"

// semconvProviders are gen_ai.provider.name values of GenAI semconv v1.41 (and the two
// older Azure spellings, mapped to their current names). A foreign value that already is
// one passes through.
var semconvProviders = map[string]string{
	"openai": "openai", "anthropic": "anthropic", "aws.bedrock": "aws.bedrock",
	"azure.ai.openai": "azure.ai.openai", "azure.ai.inference": "azure.ai.inference",
	"az.ai.openai": "azure.ai.openai", "az.ai.inference": "azure.ai.inference",
	"gcp.gemini": "gcp.gemini", "gcp.vertex_ai": "gcp.vertex_ai", "gcp.gen_ai": "gcp.gen_ai",
	"cohere": "cohere", "deepseek": "deepseek", "groq": "groq", "ibm.watsonx.ai": "ibm.watsonx.ai",
	"mistral_ai": "mistral_ai", "perplexity": "perplexity", "x_ai": "x_ai",
}

// providerAliases maps the provider ids other conventions use onto semconv values: the
// AI SDK's provider ids (the part before its API suffix), OpenInference's llm.provider
// values and LangChain's ls_provider values.
var providerAliases = map[string]string{
	"google.vertex": "gcp.vertex_ai", "google-vertex": "gcp.vertex_ai", "google_vertexai": "gcp.vertex_ai", "vertexai": "gcp.vertex_ai", "vertex_ai": "gcp.vertex_ai",
	"google.generative-ai": "gcp.gemini", "google": "gcp.gemini", "google_genai": "gcp.gemini", "gemini": "gcp.gemini",
	"amazon-bedrock": "aws.bedrock", "amazon_bedrock": "aws.bedrock", "bedrock": "aws.bedrock", "aws": "aws.bedrock",
	"azure-openai": "azure.ai.openai", "azure": "azure.ai.openai", "azure_openai": "azure.ai.openai",
	"mistral": "mistral_ai", "mistralai": "mistral_ai",
	"xai": "x_ai", "x-ai": "x_ai",
}

// aiSDKSuffixes are the API parts of AI SDK provider ids ("openai.chat", "anthropic.messages").
var aiSDKSuffixes = []string{".chat", ".responses", ".completion", ".messages", ".embedding", ".image", ".transcription", ".speech"}

// canonicalProvider maps a foreign provider id onto gen_ai.provider.name. Unknown ids
// pass through lower-cased, without an AI SDK API suffix ("ollama.chat" → "ollama").
func canonicalProvider(p string) string {
	p = strings.ToLower(strings.TrimSpace(p))
	if p == "" {
		return ""
	}
	if s, ok := semconvProviders[p]; ok {
		return s
	}
	for _, suf := range aiSDKSuffixes {
		if strings.HasSuffix(p, suf) {
			p = strings.TrimSuffix(p, suf)
			break
		}
	}
	if s, ok := semconvProviders[p]; ok {
		return s
	}
	if s, ok := providerAliases[p]; ok {
		return s
	}
	return p
}
