#!/usr/bin/env bash
# bertc init --help: usage and every option on stdout, nothing on stderr, exit 0.
source "$(dirname "$0")/lib/cli.sh"
expect_help init "usage: bertc init --config NAME|FILE --vocab FILE --out DIR" --config --vocab --out --seed --cased --force
expect_listed init '^  init +write a randomly initialised model dir'
finish
