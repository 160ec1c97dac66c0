package install

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	hubmemberrbac "github.com/etcdfed/etcdfed/config/rbac/hub-member"
	"github.com/etcdfed/etcdfed/hub/registration"
	"github.com/etcdfed/etcdfed/hub/registry"
	"github.com/etcdfed/etcdfed/internal/tokenseal"
)

// register writes the member cluster's registration Secret in the hub,
// with the hub's token for the member cluster: the existing one while it
// still authenticates, else a newly minted one.
func (o *JoinOptions) register(ctx context.Context, hub client.Client, memCS kubernetes.Interface, existing *corev1.Secret, ca []byte) error {
	dry := o.DryRun != nil
	// The hub's public sealing key, which the anchor carries: the spoke
	// seals the hub's tokens to it.
	key, err := tokenseal.EnsureKey(ctx, hub, Namespace, nil, dry)
	if err != nil {
		return err
	}
	// A token bound to the chain's anchor.
	anchor, err := o.anchor(ctx, memCS, existing != nil, key, dry)
	if err != nil {
		return err
	}
	token, minted, err := o.credential(ctx, memCS, existing, anchor, dry)
	if err != nil {
		return err
	}
	if err := o.sealedSecret(ctx, memCS, anchor, key, token, minted, dry); err != nil {
		return err
	}
	reg, err := o.registration(ca, token, anchor)
	if err != nil {
		return err
	}
	if dry {
		redact(reg, "<a token of ServiceAccount "+Namespace+"/"+hubmemberrbac.ServiceAccountName+", minted by join>")
	}
	ha := &applier{c: hub, cluster: "hub", dryRun: o.DryRun}
	rst, err := ha.apply(ctx, []*unstructured.Unstructured{reg})
	if err != nil {
		return err
	}
	if dry {
		return nil
	}
	cred := "kept the hub's token"
	if minted {
		c, _ := registration.ParseToken(token)
		cred = fmt.Sprintf("minted a token for the hub (expires %s; the spoke mints the next ones and seals them to the hub until %s, when it ends the hub's credential: run join again before)",
			c.Expiry.UTC().Format(time.RFC3339), anchor.Annotations[etcdfedv1.AnnotationCredentialNotAfter])
	}
	o.Progress(fmt.Sprintf("%s: registered in the hub as Secret %s/%s (%s); %s", o.Name, Namespace, o.Name, rst, cred))
	return nil
}

// registrations returns the registration Secret of name (nil when none)
// and every other one.
func registrations(ctx context.Context, hub client.Client, name string) (*corev1.Secret, []*corev1.Secret, error) {
	var list corev1.SecretList
	if err := hub.List(ctx, &list, client.InNamespace(Namespace), client.MatchingLabels{registry.KubeconfigSecretLabel: "true"}); err != nil {
		return nil, nil, fmt.Errorf("list the hub's registrations: %w", err)
	}
	var mine *corev1.Secret
	var others []*corev1.Secret
	for i := range list.Items {
		if list.Items[i].Name == name {
			mine = &list.Items[i]
		} else {
			others = append(others, &list.Items[i])
		}
	}
	if mine == nil {
		// A Secret of that name without the label is not a registration,
		// but Join must not overwrite it blindly either.
		sec := &corev1.Secret{}
		err := hub.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: name}, sec)
		switch {
		case err == nil && sec.Labels[LabelJoinedAs] == "":
			return nil, nil, fmt.Errorf("the hub's namespace already holds a Secret %s that is not a registration: pick another name", name)
		case err != nil && !apierrors.IsNotFound(err):
			return nil, nil, fmt.Errorf("read Secret %s/%s in the hub: %w", Namespace, name, err)
		}
	}
	return mine, others, nil
}

// ErrJoinedToAnotherHub: the member cluster's hub credential chain was
// started by another hub cluster, and Join was not asked to take it over.
var ErrJoinedToAnotherHub = errors.New("the member cluster answers another hub cluster")

// checkChain reads this hub cluster's identity and refuses, before Join
// writes anything, a member cluster whose credential chain another hub
// cluster started, unless TakeOver: two hubs writing the same member
// cluster would act on the same rings. The chain is another hub's when
// its anchor names another hub cluster, or names none (a join before the
// name was recorded) while this hub holds no registration of it.
func (o *JoinOptions) checkChain(ctx context.Context, hub, mem client.Client, existing *corev1.Secret) error {
	hubID, cur, err := readChain(ctx, hub, mem, o.Name)
	if err != nil {
		return err
	}
	o.hubID = hubID
	if cur == nil || !foreignChain(cur.Annotations[etcdfedv1.AnnotationCredentialHub], hubID, existing != nil) {
		return nil
	}
	who := chainStarter(cur)
	if o.TakeOver {
		o.Progress(fmt.Sprintf("%s: taking the member cluster over from %s: its credential chain ends now (every token of that hub stops authenticating)", o.Name, who))
		return nil
	}
	return fmt.Errorf("%s: %w: its hub credential chain (Secret %s/%s, ending %s) was started by %s, and this hub cluster is %s. A member cluster answers one hub cluster: two would act on the same rings. If that hub cluster is lost and this one takes its rings over (docs/disaster-recovery.md), join again with --take-over: that ends the other hub's access to this member cluster",
		o.Name, ErrJoinedToAnotherHub, Namespace, etcdfedv1.HubCredentialAnchor, cur.Annotations[etcdfedv1.AnnotationCredentialNotAfter], who, o.hubID)
}

// readChain reads this hub cluster's identity (the UID of its kube-system
// namespace) and the member cluster's credential chain anchor (nil when
// there is none).
func readChain(ctx context.Context, hub, mem client.Client, name string) (string, *corev1.Secret, error) {
	ns := &corev1.Namespace{}
	if err := hub.Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, ns); err != nil {
		return "", nil, fmt.Errorf("hub cluster: read namespace %s (the hub cluster's identity): %w", metav1.NamespaceSystem, err)
	}
	cur := &corev1.Secret{}
	switch err := mem.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: etcdfedv1.HubCredentialAnchor}, cur); {
	case apierrors.IsNotFound(err):
		return string(ns.UID), nil, nil
	case err != nil:
		return "", nil, fmt.Errorf("%s: read Secret %s/%s: %w", name, Namespace, etcdfedv1.HubCredentialAnchor, err)
	}
	return string(ns.UID), cur, nil
}

// chainStarter says, for messages, who started a chain foreignChain
// called another hub's.
func chainStarter(anchor *corev1.Secret) string {
	if owner := anchor.Annotations[etcdfedv1.AnnotationCredentialHub]; owner != "" {
		return "hub cluster " + owner
	}
	return "a hub cluster that holds its registration (this one holds none)"
}

// foreignChain says whether a chain whose anchor names owner belongs to
// another hub cluster than hubID; registered: this hub holds a
// registration of the member cluster.
func foreignChain(owner, hubID string, registered bool) bool {
	if owner == "" {
		return !registered
	}
	return owner != hubID
}

// anchor returns the Secret the hub's tokens are bound to
// (etcdfedv1.HubCredentialAnchor), carrying the hub's public sealing key
// key and the tokens' lifetime for the spoke: the current one while at
// least two thirds of CredentialLifetime are left on it and it is this
// hub cluster's, else a new one (the old one deleted first: every token
// bound to it stops authenticating, a stolen copy too, and another hub's
// after a take-over). An anchor of this hub that names no hub cluster,
// another key or another lifetime (an earlier join's) is kept and given
// this join's: the tokens bound to it stay good.
func (o *JoinOptions) anchor(ctx context.Context, cs kubernetes.Interface, registered bool, key string, dry bool) (*corev1.Secret, error) {
	now := time.Now()
	cur, err := cs.CoreV1().Secrets(Namespace).Get(ctx, etcdfedv1.HubCredentialAnchor, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cur = nil
	case err != nil:
		return nil, fmt.Errorf("%s: read Secret %s/%s: %w", o.Name, Namespace, etcdfedv1.HubCredentialAnchor, err)
	}
	if cur != nil && !foreignChain(cur.Annotations[etcdfedv1.AnnotationCredentialHub], o.hubID, registered) {
		end, err := time.Parse(time.RFC3339, cur.Annotations[etcdfedv1.AnnotationCredentialNotAfter])
		if err == nil && end.Sub(now) >= o.CredentialLifetime*2/3 && end.Sub(now) <= o.CredentialLifetime {
			changed := false
			for k, v := range o.anchorAnnotations(key) {
				if cur.Annotations[k] != v {
					cur.Annotations[k], changed = v, true
				}
			}
			if !changed || dry {
				return cur, nil
			}
			named, err := cs.CoreV1().Secrets(Namespace).Update(ctx, cur, metav1.UpdateOptions{})
			if err != nil {
				return nil, fmt.Errorf("%s: name this hub cluster and its sealing key on its credential chain (update Secret %s/%s): %w", o.Name, Namespace, cur.Name, err)
			}
			return named, nil
		}
	}
	ann := o.anchorAnnotations(key)
	ann[etcdfedv1.AnnotationCredentialNotAfter] = now.Add(o.CredentialLifetime).UTC().Format(time.RFC3339)
	want := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: etcdfedv1.HubCredentialAnchor, Namespace: Namespace, Annotations: ann},
		Type: corev1.SecretTypeOpaque}
	if dry {
		return want, nil
	}
	if cur != nil {
		if err := cs.CoreV1().Secrets(Namespace).Delete(ctx, cur.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cur.UID}}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%s: end the hub's old credential chain (delete Secret %s/%s): %w", o.Name, Namespace, cur.Name, err)
		}
	}
	made, err := cs.CoreV1().Secrets(Namespace).Create(ctx, want, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: start the hub's credential chain (create Secret %s/%s): %w", o.Name, Namespace, want.Name, err)
	}
	return made, nil
}

// hubOpensSealedTokens refuses a join that would end the token renewal
// of a hub that cannot open sealed tokens: a hub Deployment runs in the
// hub cluster, and there is no sealing key, which `hub install` and every
// hub since sealed tokens make. Such a hub renews its token in a member
// cluster itself; a join of this version takes that right away, so the
// hub would lose the member cluster when its token expires. Where no hub
// is deployed (a hub run elsewhere, or not yet installed) join makes the
// key itself, as before.
func hubOpensSealedTokens(ctx context.Context, hub client.Client) error {
	err := hub.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: tokenseal.KeySecret}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		return nil // there is a key, or EnsureKey says why it cannot read it
	}
	dep := &metav1.PartialObjectMetadata{}
	dep.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	switch err := hub.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: HubDeployment}, dep); {
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
		return nil
	case err != nil:
		return fmt.Errorf("hub: read Deployment %s/%s: %w", Namespace, HubDeployment, err)
	}
	return fmt.Errorf("hub: the hub deployed in %s (Deployment %s) has no sealing key (Secret %s/%s): it predates sealed tokens, "+
		"or has not started since it was upgraded. Joining now would end its token renewal in this member cluster, and it would lose the "+
		"cluster when its token expires. Upgrade the hub first (etcdfed hub install with this version), then join again. "+
		"If the key was deleted under a hub of this version, etcdfed hub install makes a new one; then join every member cluster again, "+
		"since each holds the old public key",
		Namespace, HubDeployment, Namespace, tokenseal.KeySecret)
}

// anchorAnnotations are the anchor's annotations this join sets, the
// chain's end aside: this hub cluster, its public sealing key, the
// lifetime of the tokens the spoke mints.
func (o *JoinOptions) anchorAnnotations(key string) map[string]string {
	return map[string]string{
		etcdfedv1.AnnotationCredentialHub:    o.hubID,
		etcdfedv1.AnnotationHubSealingKey:    key,
		etcdfedv1.AnnotationHubTokenLifetime: o.TokenLifetime.String(),
	}
}

// sealedSecret writes the Secret the spoke seals the hub's tokens into
// (etcdfedv1.HubSealedToken): with the token join minted, sealed to the
// hub's key key as the spoke would (so the spoke mints the next one a
// third into its life, not at once), else created empty when there is
// none. The spoke may only update it, and the hub may not write it.
func (o *JoinOptions) sealedSecret(ctx context.Context, cs kubernetes.Interface, anchor *corev1.Secret, key, token string, minted, dry bool) error {
	if dry {
		return nil
	}
	want := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: etcdfedv1.HubSealedToken, Namespace: Namespace}, Type: corev1.SecretTypeOpaque}
	if minted {
		c, err := registration.ParseToken(token)
		if err != nil {
			return fmt.Errorf("%s: the token minted for the hub: %w", o.Name, err)
		}
		box, err := tokenseal.Seal(key, tokenseal.Info(Namespace, anchor.Name, string(anchor.UID)), token)
		if err != nil {
			return fmt.Errorf("%s: seal the hub's token: %w", o.Name, err)
		}
		want.Annotations = map[string]string{
			etcdfedv1.AnnotationSealedIssued: c.IssuedAt.UTC().Format(time.RFC3339),
			etcdfedv1.AnnotationSealedExpiry: c.Expiry.UTC().Format(time.RFC3339),
			etcdfedv1.AnnotationSealedAnchor: string(anchor.UID),
			etcdfedv1.AnnotationSealedKey:    key,
		}
		want.Data = map[string][]byte{etcdfedv1.HubSealedTokenKey: box}
	}
	cur, err := cs.CoreV1().Secrets(Namespace).Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = cs.CoreV1().Secrets(Namespace).Create(ctx, want, metav1.CreateOptions{})
	case err == nil && minted:
		cur.Annotations, cur.Data = want.Annotations, want.Data
		_, err = cs.CoreV1().Secrets(Namespace).Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("%s: write Secret %s/%s (the hub's sealed token): %w", o.Name, Namespace, want.Name, err)
	}
	return nil
}

// credential returns the hub's token: the registration's current one while
// it still authenticates as the hub's ServiceAccount, is bound to anchor,
// has at least a third of its life left and was asked for with this
// lifetime, else a new one bound to anchor.
func (o *JoinOptions) credential(ctx context.Context, cs kubernetes.Interface, existing, anchor *corev1.Secret, dry bool) (token string, minted bool, err error) {
	if existing != nil && existing.Annotations[AnnotationTokenLifetime] == o.TokenLifetime.String() {
		cur := string(existing.Data[registry.TokenKey])
		if c, err := registration.ParseToken(cur); err == nil && !registration.RenewDue(c, time.Now(), 2.0/3) &&
			c.SecretName == anchor.Name && c.SecretUID == string(anchor.UID) {
			if ok, err := authenticates(ctx, cs, cur); err != nil {
				return "", false, err
			} else if ok {
				return cur, false, nil
			}
		}
	}
	if dry {
		return "", true, nil
	}
	secs := int64(o.TokenLifetime.Seconds())
	tr, err := cs.CoreV1().ServiceAccounts(Namespace).CreateToken(ctx, hubmemberrbac.ServiceAccountName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs,
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: anchor.Name, UID: anchor.UID}}}, metav1.CreateOptions{})
	if err != nil {
		return "", false, fmt.Errorf("%s: mint a token for the hub (TokenRequest): %w", o.Name, err)
	}
	return tr.Status.Token, true, nil
}

// authenticates asks the member cluster whether token is the hub's
// ServiceAccount's (TokenReview).
func authenticates(ctx context.Context, cs kubernetes.Interface, token string) (bool, error) {
	tr, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("check the hub's token (TokenReview): %w", err)
	}
	return tr.Status.Authenticated && tr.Status.User.Username == "system:serviceaccount:"+Namespace+":"+hubmemberrbac.ServiceAccountName, nil
}

// registration is the hub's registration Secret for the cluster: a
// kubeconfig naming the server and its CA (no credentials), and the token.
func (o *JoinOptions) registration(ca []byte, token string, anchor *corev1.Secret) (*unstructured.Unstructured, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[o.Name] = &clientcmdapi.Cluster{Server: o.MemberServer, CertificateAuthorityData: ca, TLSServerName: o.Member.ServerName}
	kc.AuthInfos[hubmemberrbac.ServiceAccountName] = &clientcmdapi.AuthInfo{}
	kc.Contexts[o.Name] = &clientcmdapi.Context{Cluster: o.Name, AuthInfo: hubmemberrbac.ServiceAccountName, Namespace: Namespace}
	kc.CurrentContext = o.Name
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, err
	}
	lbl := map[string]string{}
	maps.Copy(lbl, o.Labels)
	lbl[registry.KubeconfigSecretLabel] = "true"
	lbl[LabelJoinedAs] = o.Name
	return toUnstructured(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: Namespace, Labels: lbl, Annotations: map[string]string{
			// The spoke mints the next tokens and seals them to the hub.
			registration.AnnotationCredential: registration.CredentialSealedToken,
			AnnotationTokenLifetime:           o.TokenLifetime.String(),
			// The hub asks for no token past it (the spoke ends the
			// chain then whatever the hub asks).
			etcdfedv1.AnnotationCredentialNotAfter: anchor.Annotations[etcdfedv1.AnnotationCredentialNotAfter],
		}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{registry.KubeconfigSecretKey: data, registry.TokenKey: []byte(token)},
	})
}

// redact replaces every data value of a Secret with note (for printing).
func redact(sec *unstructured.Unstructured, note string) {
	data, _, _ := unstructured.NestedMap(sec.Object, "data")
	for k := range data {
		if k == registry.KubeconfigSecretKey {
			continue // a kubeconfig without credentials
		}
		data[k] = note
	}
	_ = unstructured.SetNestedMap(sec.Object, data, "data")
}

// legacyTokenSecret is the long-lived token Secret of the hub's
// ServiceAccount that installs before `etcdfed cluster join` applied
// (config/rbac/hub-member's token_secret.yaml).
const legacyTokenSecret = "etcdfed-hub-token"

// removeLegacyToken deletes that Secret, which holds a token that never
// expires, when it is there; it returns what it removed.
func removeLegacyToken(ctx context.Context, c client.Client, dry bool) (string, error) {
	sec := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: legacyTokenSecret}, sec)
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("read Secret %s/%s: %w", Namespace, legacyTokenSecret, err)
	case sec.Type != corev1.SecretTypeServiceAccountToken || sec.Annotations[corev1.ServiceAccountNameKey] != hubmemberrbac.ServiceAccountName:
		return "", nil
	case dry:
		return "", nil
	}
	if err := c.Delete(ctx, sec); client.IgnoreNotFound(err) != nil {
		return "", fmt.Errorf("delete the long-lived token Secret %s/%s: %w", Namespace, legacyTokenSecret, err)
	}
	return "Secret " + Namespace + "/" + legacyTokenSecret + " (a token that never expired, of an earlier install)", nil
}
