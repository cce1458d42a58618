/* Loading node-group drivers (.so files): permission, entry-symbol, ABI and
 * name checks, and the set of loaded drivers that owns them. */
#include "driver/loader.h"
#include "util/str.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Size of the descriptor as ABI 1.0 defines it: every field up to and
 * including `provision`. Drivers built against 1.0 or later have at least
 * this much. */
#define DRIVER_SIZE_1_0 (offsetof(prd_cloud_driver, provision) + sizeof(void (*)(void)))

void cloud_drivers_init(cloud_drivers *set)
{
	set->v = NULL;
	set->n = 0;
}

static void driver_free(cloud_driver *d)
{
	if(!d)
		return;
	if(d->api && d->api->fini && d->state)
		d->api->fini(d->state);
	if(d->handle)
		dlclose(d->handle);
	free(d->path);
	free(d);
}

void cloud_drivers_free(cloud_drivers *set)
{
	size_t i;
	/* Unload in reverse order of loading. */
	for(i = set->n; i > 0; i--)
		driver_free(set->v[i - 1]);
	free(set->v);
	set->v = NULL;
	set->n = 0;
}

cloud_driver *cloud_drivers_find(const cloud_drivers *set, const char *name)
{
	size_t i;
	for(i = 0; i < set->n; i++)
		if(strcmp(set->v[i]->api->name, name) == 0)
			return set->v[i];
	return NULL;
}

static bool valid_name(const char *s)
{
	size_t i, n;
	if(!s)
		return false;
	n = strlen(s);
	if(n == 0 || n > 63)
		return false;
	for(i = 0; i < n; i++)
		if(!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

/* The functions every driver must provide, with their names for the
 * message when one is missing. */
static const char *missing_function(const prd_cloud_driver *a)
{
	if(!a->refresh) return "refresh";
	if(!a->node_groups) return "node_groups";
	if(!a->release_node_groups) return "release_node_groups";
	/* node_group_for_node is optional since ABI 1.1: the host finds a
	 * Node's group through the instances' node names. */
	if(!a->instances) return "instances";
	if(!a->release_instances) return "release_instances";
	if(!a->template_node) return "template_node";
	if(!a->increase_size) return "increase_size";
	if(!a->delete_nodes) return "delete_nodes";
	if(!a->decrease_target_size) return "decrease_target_size";
	if(!a->release_string) return "release_string";
	if(!a->provisioning_classes != !a->provision)
		return "provisioning_classes and provision (both or neither)";
	return NULL;
}

/* Check the descriptor against the host's ABI. */
static int check_api(const char *path, const prd_cloud_driver *a, prd_err *err)
{
	const char *miss;
	if(!a)
		return prd_err_set(err, PRD_EINVAL, "cloud driver %s: entry point returned no descriptor", path);
	if(a->abi_major != PRD_CLOUD_ABI_MAJOR)
		return prd_err_set(err, PRD_EUNSUPPORTED,
				   "cloud driver %s: ABI major version %u, provreqd speaks %u "
				   "(rebuild the driver against this provreqd's cloud.h)",
				   path, a->abi_major, PRD_CLOUD_ABI_MAJOR);
	if(a->abi_minor > PRD_CLOUD_ABI_MINOR)
		return prd_err_set(err, PRD_EUNSUPPORTED,
				   "cloud driver %s: built for ABI %u.%u, newer than provreqd's %u.%u "
				   "(upgrade provreqd or rebuild the driver)",
				   path, a->abi_major, a->abi_minor, PRD_CLOUD_ABI_MAJOR, PRD_CLOUD_ABI_MINOR);
	if(a->struct_size < DRIVER_SIZE_1_0)
		return prd_err_set(err, PRD_EINVAL,
				   "cloud driver %s: descriptor is %u bytes, ABI %u.0 needs at least %zu",
				   path, a->struct_size, PRD_CLOUD_ABI_MAJOR, (size_t)DRIVER_SIZE_1_0);
	if(!valid_name(a->name))
		return prd_err_set(err, PRD_EINVAL,
				   "cloud driver %s: invalid driver name (want 1-63 of [a-z0-9-])", path);
	if(CLOUD_DRIVER_HAS(a, instance_size) &&
	   (a->instance_size < CLOUD_INSTANCE_SIZE_1_2 || a->instance_size > 4096))
		return prd_err_set(err, PRD_EINVAL,
				   "cloud driver %s (%s): instance_size %u is not a prd_cloud_instance size "
				   "(at least %zu; set it to sizeof(prd_cloud_instance))",
				   path, a->name ? a->name : "?", a->instance_size, (size_t)CLOUD_INSTANCE_SIZE_1_2);
	if(CLOUD_DRIVER_HAS(a, capabilities) && (a->capabilities & PRD_CLOUD_CAP_CONDITIONAL) &&
	   !(a->increase && a->decrease_target_size_if))
		return prd_err_set(err, PRD_EINVAL,
				   "cloud driver %s (%s): claims PRD_CLOUD_CAP_CONDITIONAL without both increase "
				   "and decrease_target_size_if",
				   path, a->name ? a->name : "?");
	if(CLOUD_DRIVER_HAS(a, capabilities) && (a->capabilities & PRD_CLOUD_CAP_FENCE) &&
	   !(CLOUD_DRIVER_HAS(a, delete_fenced) && a->fence && a->decrease && a->delete_fenced && a->increase))
		return prd_err_set(err, PRD_EINVAL,
				   "cloud driver %s (%s): claims PRD_CLOUD_CAP_FENCE without increase, fence, "
				   "decrease and delete_fenced (ABI 1.4)",
				   path, a->name ? a->name : "?");
	if(CLOUD_DRIVER_HAS(a, group_owner)) {
		int some = !!a->shapes + !!a->release_shapes + !!a->create_group + !!a->delete_group + !!a->group_owner;
		if(some && some < 5)
			return prd_err_set(err, PRD_EINVAL,
					   "cloud driver %s (%s): node auto-provisioning needs all of shapes, "
					   "release_shapes, create_group, delete_group and group_owner (ABI 1.5), or none",
					   path, a->name ? a->name : "?");
		if(some && a->shape_size && a->shape_size < sizeof(prd_cloud_shape))
			return prd_err_set(err, PRD_EINVAL,
					   "cloud driver %s (%s): shape_size %u is smaller than prd_cloud_shape (%zu)",
					   path, a->name ? a->name : "?", a->shape_size, sizeof(prd_cloud_shape));
	}
	miss = missing_function(a);
	if(miss)
		return prd_err_set(err, PRD_EINVAL, "cloud driver %s (%s): required function %s is missing",
				   path, a->name, miss);
	return 0;
}

void (*cloud_loader__between)(const char *path);

/* Whom a driver file or its directory may belong to: root or the user
 * provreqd runs as (anyone else could change the code it runs). */
static bool trusted_owner(uid_t uid)
{
	return uid == 0 || uid == geteuid();
}

/* The directory holding `path` may not let anyone else replace the file:
 * owned by a trusted user, and not writable by group or others unless
 * sticky (then only the file's owner may rename or remove it). */
static int check_dir(const char *path, prd_err *err)
{
	const char *slash = strrchr(path, '/');
	char dir[4096];
	struct stat st;
	size_t n = slash == path ? 1 : (size_t)(slash - path);
	if(n >= sizeof(dir))
		return prd_err_set(err, PRD_EINVAL, "cloud driver %s: path too long", path);
	memcpy(dir, path, n);
	dir[n] = '\0';
	if(stat(dir, &st) != 0)
		return prd_err_set(err, PRD_EIO, "cloud driver %s: directory %s: %s", path, dir, strerror(errno));
	if(!trusted_owner(st.st_uid))
		return prd_err_set(err, PRD_EPERM,
				   "cloud driver %s: refusing a file in directory %s owned by uid %u (neither root nor "
				   "provreqd's uid %u: its owner could replace the file)",
				   path, dir, (unsigned)st.st_uid, (unsigned)geteuid());
	if((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
		return prd_err_set(err, PRD_EPERM,
				   "cloud driver %s: refusing a file in directory %s writable by %s (mode %04o; chmod "
				   "go-w %s)",
				   path, dir, (st.st_mode & S_IWOTH) ? "others" : "its group",
				   (unsigned)(st.st_mode & 07777), dir);
	return 0;
}

/* Open the driver file for loading and check what was opened: a path
 * (not a bare name, which dlopen would look up on the library path
 * instead of where it was checked), not a symbolic link, a regular file
 * owned by root or provreqd's user and writable by neither its group nor
 * others, in a directory no one else may change. *fd gets the open file,
 * which is what is loaded (through /proc/self/fd), so a file swapped in
 * after the check is never the one run. */
static int open_checked(const char *path, int *fd, prd_err *err)
{
	struct stat st;
	int rc;
	*fd = -1;
	if(!strchr(path, '/'))
		return prd_err_set(err, PRD_EINVAL,
				   "cloud driver %s: give a path (./%s or an absolute one): a bare name would be looked up "
				   "on the library path, not where it was checked",
				   path, path);
	*fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if(*fd < 0) {
		int e = errno;
		if(e == ELOOP)
			return prd_err_set(err, PRD_EPERM,
					   "cloud driver %s: refusing a symbolic link (give the file it points to)", path);
		return prd_err_set(err, e == ENOENT ? PRD_ENOTFOUND : PRD_EIO, "cloud driver %s: %s", path,
				   strerror(e));
	}
	if(fstat(*fd, &st) != 0)
		rc = prd_err_set(err, PRD_EIO, "cloud driver %s: %s", path, strerror(errno));
	else if(!S_ISREG(st.st_mode))
		rc = prd_err_set(err, PRD_EINVAL, "cloud driver %s: not a regular file", path);
	else if(st.st_mode & (S_IWGRP | S_IWOTH))
		rc = prd_err_set(err, PRD_EPERM, "cloud driver %s: refusing a file writable by %s (mode %04o; chmod go-w)",
				 path, (st.st_mode & S_IWOTH) ? "others" : "its group", (unsigned)(st.st_mode & 07777));
	else if(!trusted_owner(st.st_uid))
		rc = prd_err_set(err, PRD_EPERM,
				 "cloud driver %s: refusing a file owned by uid %u (neither root nor provreqd's uid %u)",
				 path, (unsigned)st.st_uid, (unsigned)geteuid());
	else
		rc = check_dir(path, err);
	if(rc) {
		close(*fd);
		*fd = -1;
	}
	return rc;
}

int cloud_driver_check_file(const char *path, prd_err *err)
{
	int fd, rc = open_checked(path, &fd, err);
	if(fd >= 0)
		close(fd);
	return rc;
}

/* The dynamic linker knows a module loaded through /proc/self/fd/N by
 * that name, and would hand it out again for the next file loaded
 * through the same N while it is still loaded (another driver, or one a
 * killed pass abandoned in the simulation). *lfd gets a descriptor of the
 * checked file whose name no loaded module has (the file's own, or a
 * duplicate of it at a higher number; the caller closes a duplicate) and
 * fdpath its name. A module found by the file's identity rather than its
 * name is this same file: loading it again is harmless (the set then
 * refuses the duplicate name). */
static int free_fd_name(int fd, int *lfd, char *fdpath, size_t len, prd_err *err, const char *path)
{
	int tries;
	*lfd = fd;
	for(tries = 0; tries < 4096; tries++) {
		struct link_map *lm = NULL;
		void *h;
		bool taken;
		snprintf(fdpath, len, "/proc/self/fd/%d", *lfd);
		if(!(h = dlopen(fdpath, RTLD_LAZY | RTLD_NOLOAD)))
			return 0;
		taken = dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_name || !strcmp(lm->l_name, fdpath);
		dlclose(h);
		if(!taken)
			return 0;
		{
			int next = fcntl(fd, F_DUPFD_CLOEXEC, *lfd + 1);
			if(*lfd != fd)
				close(*lfd);
			*lfd = next;
			if(next < 0)
				return prd_err_set(err, PRD_EIO, "cloud driver %s: cannot duplicate its descriptor: %s", path,
						   strerror(errno));
		}
	}
	if(*lfd != fd)
		close(*lfd);
	return prd_err_set(err, PRD_ERANGE, "cloud driver %s: no free /proc/self/fd name to load it through", path);
}

int cloud_drivers_load(cloud_drivers *set, const char *path, const prd_cloud_host *host,
		       const char *config, cloud_driver **out, prd_err *err)
{
	cloud_driver *d = NULL, *dup;
	cloud_driver **nv;
	prd_cloud_entry_fn entry;
	prd_cloud_error derr;
	char fdpath[64];
	void *sym;
	int rc = 0, fd, lfd;

	if((rc = open_checked(path, &fd, err)))
		return rc;
	if(cloud_loader__between)
		cloud_loader__between(path);
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fd);
	if(access(fdpath, R_OK) != 0) {
		close(fd);
		return prd_err_set(err, PRD_EIO,
				   "cloud driver %s: cannot load the checked file through %s (%s): is /proc mounted?", path,
				   fdpath, strerror(errno));
	}
	if((rc = free_fd_name(fd, &lfd, fdpath, sizeof(fdpath), err, path))) {
		close(fd);
		return rc;
	}
	if(!(d = calloc(1, sizeof(*d))) || !(d->path = str_dup(path))) {
		if(lfd != fd)
			close(lfd);
		close(fd);
		free(d);
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	d->host = host;
	dlerror();
	d->handle = dlopen(fdpath, RTLD_NOW | RTLD_LOCAL);
	if(lfd != fd)
		close(lfd);
	close(fd);
	if(!d->handle) {
		const char *e = dlerror();
		rc = prd_err_set(err, PRD_EINVAL, "cloud driver %s: cannot load: %s", path, e ? e : "unknown error");
		goto done;
	}
	dlerror();
	sym = dlsym(d->handle, PRD_CLOUD_ENTRY_SYMBOL);
	if(!sym) {
		rc = prd_err_set(err, PRD_EINVAL,
				 "cloud driver %s: no entry symbol '%s' (is it a provreqd driver?)",
				 path, PRD_CLOUD_ENTRY_SYMBOL);
		goto done;
	}
	/* POSIX guarantees a data pointer from dlsym converts to a function
	 * pointer; the memcpy keeps ISO C quiet about it. */
	memcpy(&entry, &sym, sizeof(entry));
	d->api = entry();
	rc = check_api(path, d->api, err);
	if(rc)
		goto done;
	dup = cloud_drivers_find(set, d->api->name);
	if(dup) {
		rc = prd_err_set(err, PRD_EEXIST, "cloud driver %s: a driver named '%s' is already loaded from %s",
				 path, d->api->name, dup->path);
		goto done;
	}
	if(d->api->init) {
		memset(&derr, 0, sizeof(derr));
		rc = d->api->init(host, config, &d->state, &derr);
		if(rc) {
			rc = cloud_driver_error(d, "init", rc, &derr, NULL);
			prd_err_set(err, rc, "cloud driver %s (%s): init: %.*s", path, d->api->name,
				    (int)(PRD_CLOUD_MSG_MAX - 1),
				    derr.message[0] ? derr.message : "failed without a message");
			d->state = NULL;
			goto done;
		}
	}
	nv = realloc(set->v, (set->n + 1) * sizeof(*nv));
	if(!nv) {
		rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		goto done;
	}
	set->v = nv;
	set->v[set->n++] = d;
	if(out)
		*out = d;
	d = NULL;
done:
	driver_free(d);
	return rc;
}

int cloud_driver_error(const cloud_driver *d, const char *op, int rc,
		       const prd_cloud_error *derr, prd_err *err)
{
	int code;
	switch(rc) {
	case PRD_CLOUD_ENOMEM: code = PRD_ENOMEM; break;
	case PRD_CLOUD_EINVAL: code = PRD_EINVAL; break;
	case PRD_CLOUD_ENOTFOUND: code = PRD_ENOTFOUND; break;
	case PRD_CLOUD_ERANGE: code = PRD_ERANGE; break;
	case PRD_CLOUD_EAGAIN: code = PRD_EAGAIN; break;
	case PRD_CLOUD_EUNSUPPORTED: code = PRD_EUNSUPPORTED; break;
	default: code = PRD_EIO; break;
	}
	return prd_err_set(err, code, "cloud driver %s: %s: %.*s", d->api ? d->api->name : d->path, op,
			   (int)(PRD_CLOUD_MSG_MAX - 1),
			   derr && derr->message[0] ? derr->message : "failed without a message");
}
