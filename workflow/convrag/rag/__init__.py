"""The conversational RAG steps every study shares: query policies, retrieval over benchmark turns,
the reader, answer replay and the job plumbing of model-calling stages."""
