// (implementation pending)
