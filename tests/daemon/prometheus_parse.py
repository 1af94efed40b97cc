#!/usr/bin/python3
"""Reads Prometheus text exposition from FILE (or stdin) with the Prometheus project's own Python parser
(prometheus_client.parser) and prints what it understood, one line each, for the C++ test:

    family NAME TYPE
    sample NAME{k="v",...} VALUE      (labels sorted by name; no braces without labels)

Exits 1 with the parser's message when the text does not parse."""
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    if len(sys.argv) > 1:
        with open(sys.argv[1], encoding="utf-8") as f:
            text = f.read()
    else:
        text = sys.stdin.read()
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as e:  # the parser raises ValueError and others on bad input
        print(f"does not parse: {e!r}", file=sys.stderr)
        return 1
    for f in families:
        print(f"family {f.name} {f.type}")
        for s in f.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            series = f"{s.name}{{{labels}}}" if labels else s.name
            print(f"sample {series} {s.value!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
