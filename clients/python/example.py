"""Runs a job's loop only while this host's node holds the role (electd's Python client).

    PYTHONPATH=clients/python python3 clients/python/example.py billing 127.0.0.1:7001 10

stands node 1 of the bundled cluster for "billing", works while it holds it for 10 s,
then withdraws (0 s: until Ctrl-C)."""

import sys
import time

from electd import Election


def lost(token: int) -> None:
    # Called by the election's own timer at the promise's end, even if the node is silent.
    print(f"lost (token {token}): stop writing now", flush=True)


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else "scheduler"
    node = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1:7001"
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    end = time.monotonic() + seconds
    with Election(name, node, on_elected=lambda t: print(f"elected (token {t})", flush=True), on_lost=lost) as e:
        while seconds == 0 or time.monotonic() < end:
            token = e.token
            if token is not None:
                # Pass the token to what the job writes to, which refuses a lower one.
                print(f"working as {name} with token {token}, {e.time_left() * 1000:.0f} ms promised", flush=True)
            time.sleep(0.5)


if __name__ == "__main__":
    main()
