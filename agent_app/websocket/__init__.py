"""The chat socket's parts that are not the socket itself (``agent_app.consumers``).

``turns`` starts runs (a message, a regenerate, an edit, a version switch), ``replies``
hands a client's replies to the running request, ``people`` takes the frames of people in
the loop (ratings, asking for a person, staff); each is a class mixed into
``ChatConsumer``, which parses the frames and routes them here. Around the socket:
``unrouted`` refuses handshakes no route serves, quietly; ``script_prefix`` puts sockets
under the site's sub-path.
"""
