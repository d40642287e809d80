/// What the libcurl this process loads can do: its version, TLS library and HTTP/2 support,
/// read from `curl_version_info` (for `runner --version`).
package struct CurlVersion: Sendable {
    /// libcurl's version, e.g. "7.88.1".
    package var version: String
    /// The TLS library libcurl was built with, e.g. "OpenSSL/3.0.11", or nil without TLS.
    package var tls: String?
    /// Whether libcurl speaks HTTP/2 (`CURL_VERSION_HTTP2`).
    package var http2: Bool

    /// The loaded libcurl's, or why it cannot be used.
    package static func current() -> Result<CurlVersion, CurlUnavailable> {
        CurlLibrary.shared.map { library in
            // curl_version_info_data: { int age; const char *version; unsigned int version_num;
            // const char *host; int features; const char *ssl_version; … }, naturally aligned.
            guard let info = library.versionInfo(Curl.versionNow) else {
                return CurlVersion(version: library.version, tls: nil, http2: false)
            }
            let pointer = MemoryLayout<Int>.size
            let features = info.load(fromByteOffset: 4 * pointer, as: Int32.self)
            let tls = info.load(fromByteOffset: 5 * pointer, as: UnsafePointer<CChar>?.self).map { String(cString: $0) }
            let http2Feature: Int32 = 1 << 16  // CURL_VERSION_HTTP2
            return CurlVersion(version: library.version, tls: tls, http2: features & http2Feature != 0)
        }
    }

    /// One line: "libcurl 7.88.1, TLS OpenSSL/3.0.11, HTTP/2 yes".
    package var summary: String {
        "libcurl \(version), TLS \(tls ?? "none"), HTTP/2 \(http2 ? "yes" : "no")"
    }
}
