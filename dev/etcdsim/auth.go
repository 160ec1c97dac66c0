package etcdsim

import (
	"bytes"
	"context"
	"maps"
	"slices"

	"go.etcd.io/etcd/api/v3/authpb"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// rootRole is etcd's built-in role.
const rootRole = "root"

// authStore is etcd's users and roles, as far as the hub uses them: a
// user is the common name of a client certificate (no passwords, no
// tokens).
type authStore struct {
	enabled  bool
	revision uint64
	users    map[string][]string // user: roles, sorted
	roles    map[string][]*authpb.Permission
}

func newAuthStore() *authStore {
	return &authStore{revision: 1, users: map[string][]string{}, roles: map[string][]*authpb.Permission{}}
}

// adminPermitted is etcd's IsAdminPermitted: with authentication on, the
// caller must be a user with the root role.
func (a *authStore) adminPermitted(user string) error {
	if !a.enabled {
		return nil
	}
	if user == "" {
		return rpctypes.ErrGRPCUserEmpty
	}
	roles, ok := a.users[user]
	if !ok {
		return rpctypes.ErrGRPCUserNotFound
	}
	if !slices.Contains(roles, rootRole) {
		return rpctypes.ErrGRPCPermissionDenied
	}
	return nil
}

// requireUser is etcd's requireAuthInfo: with authentication on, the
// caller must name a user.
func (a *authStore) requireUser(user string) error {
	if a.enabled && user == "" {
		return rpctypes.ErrGRPCUserEmpty
	}
	return nil
}

// permitted: with authentication on, the caller's roles must cover the
// key range for reading or writing.
func (a *authStore) permitted(user string, key, end []byte, write bool) error {
	if !a.enabled {
		return nil
	}
	if user == "" {
		return rpctypes.ErrGRPCUserEmpty
	}
	roles, ok := a.users[user]
	if !ok {
		return rpctypes.ErrGRPCPermissionDenied
	}
	if slices.Contains(roles, rootRole) {
		return nil
	}
	for _, role := range roles {
		for _, p := range a.roles[role] {
			if write && p.PermType == authpb.READ || !write && p.PermType == authpb.WRITE {
				continue
			}
			if covers(p, key, end) {
				return nil
			}
		}
	}
	return rpctypes.ErrGRPCPermissionDenied
}

func covers(p *authpb.Permission, key, end []byte) bool {
	if len(end) == 0 {
		return inRange(key, p.Key, p.RangeEnd)
	}
	if bytes.Compare(key, p.Key) < 0 {
		return false
	}
	if len(p.RangeEnd) == 1 && p.RangeEnd[0] == 0 {
		return true
	}
	if len(end) == 1 && end[0] == 0 {
		return false
	}
	return bytes.Compare(end, p.RangeEnd) <= 0
}

type authService struct {
	pb.UnimplementedAuthServer
}

// authCall runs an authentication change or read through the "log": it
// needs a quorum, and (but AuthStatus) the root role once authentication
// is on.
func authCall[T any](ctx context.Context, req any, admin bool, f func(r *Ring, a *authStore, h *pb.ResponseHeader) (T, error)) (T, error) {
	var zero T
	r, m, ci, err := begin(ctx, req)
	if err != nil {
		return zero, err
	}
	if err := r.waitQuorum(ctx, m); err != nil {
		return zero, err
	}
	defer r.mu.Unlock()
	if admin {
		if err := r.auth.adminPermitted(ci.commonName); err != nil {
			return zero, err
		}
	}
	rev := r.auth.revision
	out, err := f(r, r.auth, r.header(m))
	if err != nil {
		return zero, err
	}
	if r.auth.revision != rev {
		r.commitLocked()
	}
	return out, nil
}

func (authService) AuthEnable(ctx context.Context, req *pb.AuthEnableRequest) (*pb.AuthEnableResponse, error) {
	return authCall(ctx, req, true, func(_ *Ring, a *authStore, h *pb.ResponseHeader) (*pb.AuthEnableResponse, error) {
		if !a.enabled {
			roles, ok := a.users[rootRole]
			if !ok {
				return nil, rpctypes.ErrGRPCRootUserNotExist
			}
			if !slices.Contains(roles, rootRole) {
				return nil, rpctypes.ErrGRPCRootRoleNotExist
			}
			a.enabled = true
			a.revision++
		}
		return &pb.AuthEnableResponse{Header: h}, nil
	})
}

func (authService) AuthDisable(ctx context.Context, req *pb.AuthDisableRequest) (*pb.AuthDisableResponse, error) {
	return authCall(ctx, req, true, func(_ *Ring, a *authStore, h *pb.ResponseHeader) (*pb.AuthDisableResponse, error) {
		if a.enabled {
			a.enabled = false
			a.revision++
		}
		return &pb.AuthDisableResponse{Header: h}, nil
	})
}

func (authService) AuthStatus(ctx context.Context, req *pb.AuthStatusRequest) (*pb.AuthStatusResponse, error) {
	return authCall(ctx, req, false, func(_ *Ring, a *authStore, h *pb.ResponseHeader) (*pb.AuthStatusResponse, error) {
		return &pb.AuthStatusResponse{Header: h, Enabled: a.enabled, AuthRevision: a.revision}, nil
	})
}

func (authService) UserAdd(ctx context.Context, req *pb.AuthUserAddRequest) (*pb.AuthUserAddResponse, error) {
	return authCall(ctx, req, true, func(_ *Ring, a *authStore, h *pb.ResponseHeader) (*pb.AuthUserAddResponse, error) {
		if req.Name == "" {
			return nil, rpctypes.ErrGRPCUserEmpty
		}
		if _, ok := a.users[req.Name]; ok {
			return nil, rpctypes.ErrGRPCUserAlreadyExist
		}
		a.users[req.Name] = nil
		a.revision++
		return &pb.AuthUserAddResponse{Header: h}, nil
	})
}

func (authService) UserGet(ctx context.Context, req *pb.AuthUserGetRequest) (*pb.AuthUserGetResponse, error) {
	return authCall(ctx, req, true, func(_ *Ring, a *authStore, h *pb.ResponseHeader) (*pb.AuthUserGetResponse, error) {
		roles, ok := a.users[req.Name]
		if !ok {
			return nil, rpctypes.ErrGRPCUserNotFound
		}
		return &pb.AuthUserGetResponse{Header: h, Roles: slices.Clone(roles)}, nil
	})
}

func (authService) UserList(ctx context.Context, req *pb.AuthUserListRequest) (*pb.AuthUserListResponse, error) {
	return authCall(ctx, req, true, func(_ *Ring, a *authStore, h *pb.ResponseHeader) (*pb.AuthUserListResponse, error) {
		return &pb.AuthUserListResponse{Header: h, Users: slices.Sorted(maps.Keys(a.users))}, nil
	})
}

func (authService) UserDelete(ctx context.Context, req *pb.AuthUserDeleteRequest) (*pb.AuthUserDeleteResponse, error) {
	return authCall(ctx, req, true, func(_ *Ring, a *authStore, h *pb.ResponseHeader) (*pb.AuthUserDeleteResponse, error) {
		if a.enabled && req.Name == rootRole {
			return nil, rpctypes.ErrGRPCInvalidAuthMgmt
		}
		if _, ok := a.users[req.Name]; !ok {
			return nil, rpctypes.ErrGRPCUserNotFound
		}
		delete(a.users, req.Name)
		a.revision++
		return &pb.AuthUserDeleteResponse{Header: h}, nil
	})
}

func (authService) UserGrantRole(ctx context.Context, req *pb.AuthUserGrantRoleRequest) (*pb.AuthUserGrantRoleResponse, error) {
	return authCall(ctx, req, true, func(_ *Ring, a *authStore, h *pb.ResponseHeader) (*pb.AuthUserGrantRoleResponse, error) {
		roles, ok := a.users[req.User]
		if !ok {
			return nil, rpctypes.ErrGRPCUserNotFound
		}
		if _, ok := a.roles[req.Role]; !ok && req.Role != rootRole {
			return nil, rpctypes.ErrGRPCRoleNotFound
		}
		if !slices.Contains(roles, req.Role) {
			roles = append(roles, req.Role)
			slices.Sort(roles)
			a.users[req.User] = roles
			a.revision++
		}
		return &pb.AuthUserGrantRoleResponse{Header: h}, nil
	})
}

func (authService) UserRevokeRole(ctx context.Context, req *pb.AuthUserRevokeRoleRequest) (*pb.AuthUserRevokeRoleResponse, error) {
	return authCall(ctx, req, true, func(_ *Ring, a *authStore, h *pb.ResponseHeader) (*pb.AuthUserRevokeRoleResponse, error) {
		if a.enabled && req.Name == rootRole && req.Role == rootRole {
			return nil, rpctypes.ErrGRPCInvalidAuthMgmt
		}
		roles, ok := a.users[req.Name]
		if !ok {
			return nil, rpctypes.ErrGRPCUserNotFound
		}
		if !slices.Contains(roles, req.Role) {
			return nil, rpctypes.ErrGRPCRoleNotGranted
		}
		a.users[req.Name] = slices.DeleteFunc(roles, func(s string) bool { return s == req.Role })
		a.revision++
		return &pb.AuthUserRevokeRoleResponse{Header: h}, nil
	})
}

func (authService) RoleAdd(ctx context.Context, req *pb.AuthRoleAddRequest) (*pb.AuthRoleAddResponse, error) {
	return authCall(ctx, req, true, func(_ *Ring, a *authStore, h *pb.ResponseHeader) (*pb.AuthRoleAddResponse, error) {
		if req.Name == "" {
			return nil, rpctypes.ErrGRPCRoleEmpty
		}
		if _, ok := a.roles[req.Name]; ok {
			return nil, rpctypes.ErrGRPCRoleAlreadyExist
		}
		a.roles[req.Name] = nil
		a.revision++
		return &pb.AuthRoleAddResponse{Header: h}, nil
	})
}

func (authService) RoleGet(ctx context.Context, req *pb.AuthRoleGetRequest) (*pb.AuthRoleGetResponse, error) {
	return authCall(ctx, req, true, func(_ *Ring, a *authStore, h *pb.ResponseHeader) (*pb.AuthRoleGetResponse, error) {
		perms, ok := a.roles[req.Role]
		if !ok {
			return nil, rpctypes.ErrGRPCRoleNotFound
		}
		resp := &pb.AuthRoleGetResponse{Header: h}
		for _, p := range perms {
			resp.Perm = append(resp.Perm, &authpb.Permission{PermType: p.PermType, Key: p.Key, RangeEnd: p.RangeEnd})
		}
		if req.Role == rootRole {
			resp.Perm = append(resp.Perm, &authpb.Permission{PermType: authpb.READWRITE, Key: []byte{}, RangeEnd: []byte{0}})
		}
		return resp, nil
	})
}

func (authService) RoleList(ctx context.Context, req *pb.AuthRoleListRequest) (*pb.AuthRoleListResponse, error) {
	return authCall(ctx, req, true, func(_ *Ring, a *authStore, h *pb.ResponseHeader) (*pb.AuthRoleListResponse, error) {
		return &pb.AuthRoleListResponse{Header: h, Roles: slices.Sorted(maps.Keys(a.roles))}, nil
	})
}

func (authService) RoleDelete(ctx context.Context, req *pb.AuthRoleDeleteRequest) (*pb.AuthRoleDeleteResponse, error) {
	return authCall(ctx, req, true, func(_ *Ring, a *authStore, h *pb.ResponseHeader) (*pb.AuthRoleDeleteResponse, error) {
		if a.enabled && req.Role == rootRole {
			return nil, rpctypes.ErrGRPCInvalidAuthMgmt
		}
		if _, ok := a.roles[req.Role]; !ok {
			return nil, rpctypes.ErrGRPCRoleNotFound
		}
		delete(a.roles, req.Role)
		for u, roles := range a.users {
			a.users[u] = slices.DeleteFunc(roles, func(s string) bool { return s == req.Role })
		}
		a.revision++
		return &pb.AuthRoleDeleteResponse{Header: h}, nil
	})
}

func (authService) RoleGrantPermission(ctx context.Context, req *pb.AuthRoleGrantPermissionRequest) (*pb.AuthRoleGrantPermissionResponse, error) {
	return authCall(ctx, req, true, func(_ *Ring, a *authStore, h *pb.ResponseHeader) (*pb.AuthRoleGrantPermissionResponse, error) {
		perms, ok := a.roles[req.Name]
		if !ok {
			return nil, rpctypes.ErrGRPCRoleNotFound
		}
		if req.Perm == nil {
			return nil, rpctypes.ErrGRPCPermissionNotGiven
		}
		p := &authpb.Permission{PermType: req.Perm.PermType, Key: slices.Clone(req.Perm.Key), RangeEnd: slices.Clone(req.Perm.RangeEnd)}
		i := slices.IndexFunc(perms, func(q *authpb.Permission) bool {
			return bytes.Equal(q.Key, p.Key) && bytes.Equal(q.RangeEnd, p.RangeEnd)
		})
		if i >= 0 {
			perms[i] = p
		} else {
			perms = append(perms, p)
			slices.SortFunc(perms, func(x, y *authpb.Permission) int {
				if c := bytes.Compare(x.Key, y.Key); c != 0 {
					return c
				}
				return bytes.Compare(x.RangeEnd, y.RangeEnd)
			})
		}
		a.roles[req.Name] = perms
		a.revision++
		return &pb.AuthRoleGrantPermissionResponse{Header: h}, nil
	})
}

func (authService) RoleRevokePermission(ctx context.Context, req *pb.AuthRoleRevokePermissionRequest) (*pb.AuthRoleRevokePermissionResponse, error) {
	return authCall(ctx, req, true, func(_ *Ring, a *authStore, h *pb.ResponseHeader) (*pb.AuthRoleRevokePermissionResponse, error) {
		perms, ok := a.roles[req.Role]
		if !ok {
			return nil, rpctypes.ErrGRPCRoleNotFound
		}
		i := slices.IndexFunc(perms, func(q *authpb.Permission) bool {
			return bytes.Equal(q.Key, req.Key) && bytes.Equal(q.RangeEnd, req.RangeEnd)
		})
		if i < 0 {
			return nil, rpctypes.ErrGRPCPermissionNotGranted
		}
		a.roles[req.Role] = slices.Delete(perms, i, i+1)
		a.revision++
		return &pb.AuthRoleRevokePermissionResponse{Header: h}, nil
	})
}
