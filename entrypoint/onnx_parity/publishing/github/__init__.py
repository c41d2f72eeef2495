"""GitHub's REST API: a retrying client (`http`) and the sticky PR comment (`comments`)."""

from onnx_parity.publishing.github.comments import CommentOutcome, comment_marker, upsert_comment
from onnx_parity.publishing.github.http import GitHubClient, GitHubError, Response, RetryPolicy

__all__ = [
    "CommentOutcome",
    "GitHubClient",
    "GitHubError",
    "Response",
    "RetryPolicy",
    "comment_marker",
    "upsert_comment",
]
