#!/usr/bin/env bash
# bertc eval --help: usage and options on stdout, nothing on stderr, exit 0;
# bertc --help lists the command.
source "$(dirname "$0")/lib/cli.sh"
expect_help eval "usage: bertc eval DATA.json PRED.json [--metric squad|cmrc]" --metric squad cmrc
expect_listed eval '^  eval +exact match and F1'
finish
