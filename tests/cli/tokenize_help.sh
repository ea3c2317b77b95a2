#!/usr/bin/env bash
# bertc tokenize --help: usage on stdout, exit 0, every option listed, nothing on stderr.
source "$(dirname "$0")/lib/cli.sh"
expect_help tokenize "usage: bertc tokenize" --vocab --cased --offsets --help
expect_listed tokenize "^  tokenize "
finish
