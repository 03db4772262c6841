"""Write the CPU quickstart dataset: 4 queries with rubrics and 7 ranked references each (best first).

Usage: python examples/make_quickstart_data.py [OUTPUT.jsonl]   (default outputs/quickstart_data.jsonl)

The columns are the ones every trainer reads (docs/trainers.md): `prompt` (chat), `query_id`,
`rubrics` ({text, weight}), `references` (best first, as Nectar's seven ranked answers).
References degrade from a complete answer to an off-topic one, so the embedded judge has
a quality scale per query.
"""

import json
import sys
from pathlib import Path

QUERIES = {
    "capital": (
        "What is the capital of France?",
        [
            "Paris is the capital of France.",
            "The capital of France is Paris.",
            "Paris.",
            "It is a city in France.",
            "France has a capital.",
            "I think it is Lyon.",
            "The quick brown fox jumps over the lazy dog.",
        ],
    ),
    "sea": (
        "Write a poem about the sea.",
        [
            "The sea is wide, the waves are bright, the wind and the light dance over the water.",
            "Waves and wind over the sea, light on the water.",
            "The sea has waves and wind.",
            "A poem about water.",
            "The sea.",
            "Here is a detailed and helpful answer.",
            "0 1 2 3 4 5 6 7 8 9",
        ],
    ),
    "python": (
        "Explain what Python is.",
        [
            "Python is a programming language with lists, dictionaries and functions.",
            "Python is a programming language.",
            "A language for programming.",
            "Python has functions.",
            "It is a language.",
            "Thank you for your question.",
            "The lazy dog.",
        ],
    ),
    "steps": (
        "Explain the answer step by step, then give a short summary.",
        [
            "First, read the question. Second, explain each step clearly. Summary: a clear and complete answer.",
            "Explain step by step, then summarize.",
            "Step one, step two, summary.",
            "Here is a summary.",
            "The answer.",
            "Paris is the capital of France.",
            "100 1000",
        ],
    ),
}
RUBRICS = [
    {"text": "Answers the question that was asked", "weight": 5},
    {"text": "Is correct and complete", "weight": 4},
    {"text": "Is clear and concise", "weight": 2},
]


def main(output: str = "outputs/quickstart_data.jsonl") -> Path:
    path = Path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        for query_id, (question, references) in QUERIES.items():
            row = {
                "prompt": [{"role": "user", "content": question}],
                "query_id": query_id,
                "rubrics": RUBRICS,
                "references": references,
            }
            f.write(json.dumps(row) + "\n")
    return path


if __name__ == "__main__":
    print(main(*sys.argv[1:2]))
