"""Where toolregistry keeps its call types (``toolregistry.llm``), for programs that import them
from there."""
