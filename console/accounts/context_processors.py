from console.accounts import permissions


def roles(request):
    """What the navigation may offer this user; templates never test role names themselves."""
    user = request.user
    return {
        "user_reads_decisions": permissions.can_read_decisions(user),
        "user_reads_stats": permissions.can_read_stats(user),
        "user_reads_disputes": permissions.can_read_disputes(user),
        "user_grades": permissions.can_grade(user),
        "user_reviews_labels": permissions.can_review_labels(user),
        "user_manages_grading": permissions.can_manage_grading(user),
        "user_reads_audit": permissions.can_read_audit(user),
        "user_reads_outbox": permissions.can_read_outbox(user),
        "user_manages_workspace": permissions.can_manage_workspace(user),
        "user_reads_gaps": permissions.can_read_gaps(user),
    }
