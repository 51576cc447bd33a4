"""The embedded server: the reference engine behind llama.cpp- and OpenAI-shaped APIs."""
