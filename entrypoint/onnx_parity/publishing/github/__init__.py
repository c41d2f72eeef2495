"""GitHub: the action's step (action.py and the modules it names), the REST client, the comment."""
