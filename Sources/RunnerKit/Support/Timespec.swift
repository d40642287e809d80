import Glibc

extension timespec {
    /// Whole seconds since 1970 (a file's mtime, say).
    var wholeSeconds: Int { Int(tv_sec) }
    /// Milliseconds since 1970.
    var milliseconds: Int64 { Int64(tv_sec) * 1000 + Int64(tv_nsec) / 1_000_000 }
}
