"""The dispatcher: a windowed timeline of pending jobs, a bounded pool of worker threads, and the loop.

``heap``, ``timeline``, ``pool``, ``clock``, ``loop``, ``shutdown`` and the
contract modules ``types``, ``policy``, ``wakeup`` and ``protocol`` import
nothing from Django (a test checks it); ``store``, ``runner``, ``listener``,
``pg`` and ``wiring`` adapt them to the database.
"""
