# Base tools: make and git are on the machine image; Go is at /usr/local/go.
command -v make >/dev/null || apt-get install -y -qq --no-install-recommends make
command -v git >/dev/null || apt-get install -y -qq --no-install-recommends git
go version
