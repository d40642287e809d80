import Glibc

/// OpenSSL's SHA-256 functions, loaded at run time with `dlopen` when the machine has libcrypto
/// (the TLS library of libcurl on most Linux systems, so usually already in the process).
/// OpenSSL uses the processor's SHA instructions where it has them: on a 2-core AMD EPYC about
/// 1.7 GB/s against about 200 MB/s for `SHA256`'s own code, which stays the fallback.
///
/// The low-level `SHA256_Init/Update/Final` take a context the caller owns (`SHA256_CTX`,
/// 112 bytes in OpenSSL 1.1 and 3), so a hasher copies as a plain value; they are in both
/// versions (deprecated, not removed, in 3). A libcrypto without them is not used.
struct CryptoLibrary: @unchecked Sendable {  // immutable; holds C function pointers only
    let initialize: @convention(c) (UnsafeMutableRawPointer?) -> Int32
    let update: @convention(c) (UnsafeMutableRawPointer?, UnsafeRawPointer?, Int) -> Int32
    let finish: @convention(c) (UnsafeMutablePointer<UInt8>?, UnsafeMutableRawPointer?) -> Int32
    /// The file loaded, e.g. "libcrypto.so.3".
    let name: String

    /// libcrypto's SHA-256, or nil when this process cannot load it.
    static let shared: CryptoLibrary? = load()

    /// The files tried, in order (OpenSSL 3, then 1.1).
    static let names = ["libcrypto.so.3", "libcrypto.so.1.1"]

    private static func load() -> CryptoLibrary? {
        for name in names {
            guard let handle = dlopen(name, RTLD_NOW | RTLD_LOCAL) else { continue }
            if let initialize = dlsym(handle, "SHA256_Init"), let update = dlsym(handle, "SHA256_Update"),
                let finish = dlsym(handle, "SHA256_Final")
            {
                return CryptoLibrary(
                    initialize: unsafeBitCast(initialize, to: (@convention(c) (UnsafeMutableRawPointer?) -> Int32).self),
                    update: unsafeBitCast(update, to: (@convention(c) (UnsafeMutableRawPointer?, UnsafeRawPointer?, Int) -> Int32).self),
                    finish: unsafeBitCast(finish, to: (@convention(c) (UnsafeMutablePointer<UInt8>?, UnsafeMutableRawPointer?) -> Int32).self),
                    name: name)
            }
            dlclose(handle)
        }
        return nil
    }
}
