def render(results):
    import json
    return json.dumps(results.get("results"), indent=1, default=str)[:3000]


def write_docs(results, text):
    pass
