"""The dispatcher: a windowed timeline of pending jobs, a bounded worker pool, and the loop.

``heap``, ``timeline``, ``pool``, ``clock`` and ``loop`` import nothing from
Django (a test checks it); ``store``, ``runner`` and ``listener`` adapt them
to the database.
"""
