#!/usr/bin/env bash
# bertc features --help: exit 0, usage and every option on stdout, nothing on stderr.
source "$(dirname "$0")/lib/cli.sh"
expect_help features "bertc features --model DIR --data FILE" --model --data --max-seq-length --doc-stride \
    --max-query-length --threads --dump --cache
expect_listed features "features"
finish
