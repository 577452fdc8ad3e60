from procrastinate.contrib.django import app

from bench import stamps


@app.task(name="noop")
def noop():
    return None


@app.task(name="stamp")
def stamp(key, due):
    stamps.record(key, due)
