#!/usr/bin/env bash
# Installs the test-only npm packages of tests/server/ into DIR (a build
# folder's server-node/): the official `openai` client and, for the page
# test, puppeteer-core (which drives Debian's chromium; it downloads no
# browser). Skips what is there already.
#   tests/server/setup_node.sh DIR
set -euo pipefail
dir=$1
mkdir -p "$dir"
if [ -d "$dir/node_modules/openai" ] && [ -d "$dir/node_modules/puppeteer-core" ]; then exit 0; fi
cd "$dir"
[ -f package.json ] || echo '{"name":"latte-server-tests","private":true}' >package.json
npm install --no-audit --no-fund --loglevel=error openai@4 puppeteer-core@23
