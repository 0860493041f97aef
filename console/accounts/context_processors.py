from console.accounts import permissions


def roles(request):
    user = request.user
    return {
        "user_roles": permissions.roles_of(user),
        "user_reads_decisions": permissions.can_read_decisions(user),
    }
