#!/usr/bin/env bash
# bertc's top-level usage: an unknown command and no command exit 2, and
# bertc --help states the exit codes.
source "$(dirname "$0")/lib/cli.sh"
expect 2 "unknown command 'no-such-command'" -- no-such-command
"$BERTC" >/dev/null 2>&1
[ $? -eq 2 ] || cli_bad "bertc without a command should exit 2"
"$BERTC" --help | grep -qF "exit codes: 0 done, 1 runtime failure, 2 bad usage or input, 75 stopped by a signal" ||
    cli_bad "bertc --help lacks the exit codes"
finish
