"""An MCP server that gives up before the handshake, as a misconfigured one would."""

import sys

sys.stderr.write("exit_at_once.py: no configuration found, giving up\n")
sys.exit(3)
