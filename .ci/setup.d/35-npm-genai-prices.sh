# The independent price dataset (@pydantic/genai-prices, pinned in
# test/genai-prices/package-lock.json) that pricing/crosscheck_test.go compares the
# default price table against. Node and npm come from 30-npm-sdks.sh.
(cd test/genai-prices && npm ci --no-audit --no-fund)
