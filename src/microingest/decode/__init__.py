"""Read/decode: Kafka records to staged rows or dead letters, every value proven storable."""
