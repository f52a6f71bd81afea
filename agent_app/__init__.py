"""The chat app: sessions over WebSocket, ORM persistence, admin and pages."""
