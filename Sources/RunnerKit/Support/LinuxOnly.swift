// The runner builds on Linux only: it calls Glibc, the kernel's routing netlink and inotify.
// Say so in one line instead of a page of missing modules.
#if !os(Linux)
#error("runner builds on Linux only (it uses Glibc, netlink and inotify); see README, Platforms")
#endif
