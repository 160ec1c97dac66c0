package etcdops

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/etcd/api/v3/authpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// etcd's authentication, as the hub reads and changes it. The hub is root
// (its client certificate's common name is a user with the root role), so
// every call here is allowed once authentication is on; before, anyone
// may make them.

// Permission types, as etcd names them.
const (
	PermRead      = "READ"
	PermWrite     = "WRITE"
	PermReadWrite = "READWRITE"
)

// RootRole is etcd's built-in role that may do anything.
const RootRole = "root"

// Permission is one key range a role may read, write or both.
type Permission struct {
	Type     string
	Key      string
	RangeEnd string
}

// AuthState is what etcd's authentication holds.
type AuthState struct {
	Enabled bool
	// Users maps every user to its roles.
	Users map[string][]string
	// Roles maps every role to its permissions.
	Roles map[string][]Permission
}

// AuthOp is one kind of change to etcd's authentication.
type AuthOp string

// Changes. hub/clients' PlanAccess orders them: the hub's users and each
// consumer's role, permissions, user and grants first, removed consumers'
// users then roles next, Enable last; Disable comes alone.
const (
	AuthAddUser          AuthOp = "AddUser"
	AuthAddRole          AuthOp = "AddRole"
	AuthGrantPermission  AuthOp = "GrantPermission"
	AuthRevokePermission AuthOp = "RevokePermission"
	AuthGrantRole        AuthOp = "GrantRole"
	AuthRevokeRole       AuthOp = "RevokeRole"
	AuthDeleteUser       AuthOp = "DeleteUser"
	AuthDeleteRole       AuthOp = "DeleteRole"
	AuthEnable           AuthOp = "Enable"
	AuthDisable          AuthOp = "Disable"
)

// AuthChange is one change.
type AuthChange struct {
	Op   AuthOp
	User string
	Role string
	Perm Permission
}

func (c AuthChange) String() string {
	switch c.Op {
	case AuthAddUser, AuthDeleteUser:
		return fmt.Sprintf("%s %s", c.Op, c.User)
	case AuthAddRole, AuthDeleteRole:
		return fmt.Sprintf("%s %s", c.Op, c.Role)
	case AuthGrantRole, AuthRevokeRole:
		return fmt.Sprintf("%s %s to %s", c.Op, c.Role, c.User)
	case AuthGrantPermission, AuthRevokePermission:
		return fmt.Sprintf("%s %s [%q, %q) on %s", c.Op, c.Perm.Type, c.Perm.Key, c.Perm.RangeEnd, c.Role)
	}
	return string(c.Op)
}

// ReadAuth reads whether authentication is on, every user with its roles
// and every role with its permissions.
func (c *Client) ReadAuth(ctx context.Context) (AuthState, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*RequestTimeout)
	defer cancel()
	st := AuthState{Users: map[string][]string{}, Roles: map[string][]Permission{}}
	as, err := c.c.AuthStatus(ctx)
	if err != nil {
		return st, fmt.Errorf("read auth status: %w", err)
	}
	st.Enabled = as.Enabled
	users, err := c.c.UserList(ctx)
	if err != nil {
		return st, fmt.Errorf("list users: %w", err)
	}
	for _, u := range users.Users {
		r, err := c.c.UserGet(ctx, u)
		if err != nil {
			return st, fmt.Errorf("get user %s: %w", u, err)
		}
		st.Users[u] = slices.Sorted(slices.Values(r.Roles))
	}
	roles, err := c.c.RoleList(ctx)
	if err != nil {
		return st, fmt.Errorf("list roles: %w", err)
	}
	for _, name := range roles.Roles {
		r, err := c.c.RoleGet(ctx, name)
		if err != nil {
			return st, fmt.Errorf("get role %s: %w", name, err)
		}
		var perms []Permission
		for _, p := range r.Perm {
			perms = append(perms, Permission{Type: authpb.Permission_Type_name[int32(p.PermType)], Key: string(p.Key), RangeEnd: string(p.RangeEnd)})
		}
		st.Roles[name] = perms
	}
	return st, nil
}

// ApplyAuth makes one change. A change already made (a user or role that
// exists, a grant already given, something already gone) is no error.
func (c *Client) ApplyAuth(ctx context.Context, ch AuthChange) error {
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	var err error
	switch ch.Op {
	case AuthAddUser:
		// No password: the user is only ever its certificate's common name.
		_, err = c.c.UserAddWithOptions(ctx, ch.User, "", &clientv3.UserAddOptions{NoPassword: true})
		if errors.Is(err, rpctypes.ErrUserAlreadyExist) {
			err = nil
		}
	case AuthAddRole:
		_, err = c.c.RoleAdd(ctx, ch.Role)
		if errors.Is(err, rpctypes.ErrRoleAlreadyExist) {
			err = nil
		}
	case AuthGrantPermission:
		pt, ok := authpb.Permission_Type_value[ch.Perm.Type]
		if !ok {
			return fmt.Errorf("unknown permission type %q", ch.Perm.Type)
		}
		_, err = c.c.RoleGrantPermission(ctx, ch.Role, ch.Perm.Key, ch.Perm.RangeEnd, clientv3.PermissionType(pt))
	case AuthRevokePermission:
		_, err = c.c.RoleRevokePermission(ctx, ch.Role, ch.Perm.Key, ch.Perm.RangeEnd)
		if errors.Is(err, rpctypes.ErrPermissionNotGranted) {
			err = nil
		}
	case AuthGrantRole:
		_, err = c.c.UserGrantRole(ctx, ch.User, ch.Role)
	case AuthRevokeRole:
		_, err = c.c.UserRevokeRole(ctx, ch.User, ch.Role)
		if errors.Is(err, rpctypes.ErrRoleNotGranted) {
			err = nil
		}
	case AuthDeleteUser:
		_, err = c.c.UserDelete(ctx, ch.User)
		if errors.Is(err, rpctypes.ErrUserNotFound) {
			err = nil
		}
	case AuthDeleteRole:
		_, err = c.c.RoleDelete(ctx, ch.Role)
		if errors.Is(err, rpctypes.ErrRoleNotFound) {
			err = nil
		}
	case AuthEnable:
		_, err = c.c.AuthEnable(ctx)
	case AuthDisable:
		_, err = c.c.AuthDisable(ctx)
	default:
		return fmt.Errorf("unknown auth change %q", ch.Op)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", ch, err)
	}
	return nil
}

// ForRing connects to an EtcdCluster's members through status.endpoints
// with the hub's own client certificate (the Secret pki.HubClientSecretName
// the EtcdCluster reconciler keeps), for the hub's controllers beside the
// reconciler (backups, consumers' access). An adopted ring with
// spec.adopt.clientSecretName is dialled with that certificate instead,
// as the reconciler dials it: on a cluster that had authentication on
// before etcdfed, the hub's own user exists only once the hub, as that
// certificate's root user, has added it. The caller closes it.
func ForRing(ctx context.Context, r client.Reader, ec *etcdfedv1.EtcdCluster) (*Client, error) {
	if len(ec.Status.Endpoints) == 0 {
		return nil, errors.New("etcd has no client endpoints yet (status.endpoints is empty)")
	}
	var tlsCfg *tls.Config
	if ec.Spec.TLS.Mode.Enabled() {
		name := pki.HubClientSecretName(ec)
		sec := &corev1.Secret{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: ec.Namespace, Name: name}, sec); err != nil {
			return nil, fmt.Errorf("read the hub's etcd client certificate %s/%s: %w", ec.Namespace, name, err)
		}
		leaf := &pki.Leaf{CertPEM: sec.Data[pki.KeyCert], KeyPEM: sec.Data[pki.KeyKey]}
		if a := ec.Spec.Adopt; a != nil && a.ClientSecretName != "" {
			name = a.ClientSecretName
			adopt := &corev1.Secret{}
			if err := r.Get(ctx, client.ObjectKey{Namespace: ec.Namespace, Name: name}, adopt); err != nil {
				return nil, fmt.Errorf("read the client certificate %s/%s named in spec.adopt.clientSecretName: %w", ec.Namespace, name, err)
			}
			leaf = &pki.Leaf{CertPEM: adopt.Data[pki.KeyCert], KeyPEM: adopt.Data[pki.KeyKey]}
		}
		var err error
		tlsCfg, err = pki.ClientTLS(sec.Data[pki.KeyCA], leaf)
		if err != nil {
			return nil, fmt.Errorf("hub client certificate %s/%s: %w", ec.Namespace, name, err)
		}
	}
	return New(Config{Endpoints: ec.Status.Endpoints, TLS: tlsCfg})
}
