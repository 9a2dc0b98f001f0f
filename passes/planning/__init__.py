"""Static memory planning on interval sets: buffers with lifetimes and sizes get offsets.

This package knows nothing of the IR: PlanMemory turns a function into :class:`Buffer`
lists, asks a planner for offsets, checks them with the independent checker and rewrites
the IR. The same code plans MiniMalloc's benchmark instances. :mod:`.order` solves the step
before, for ReorderForMemory: the order of a DAG's nodes that keeps the fewest bytes live.
"""
