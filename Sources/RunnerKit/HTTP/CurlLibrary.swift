import Glibc

/// The few libcurl functions `CurlFetcher` calls, loaded at run time with `dlopen`, so that
/// building the runner needs no libcurl headers: FoundationNetworking links libcurl already.
///
/// libcurl's option setters (`curl_easy_setopt`, `curl_multi_setopt`, `curl_easy_getinfo`) are
/// variadic in C. They are declared here with the one argument each call passes (a `long` or a
/// pointer): on the Linux calling conventions Swift supports (x86-64 System V, AArch64), such an
/// argument travels in the same register as a variadic one.
struct CurlLibrary: @unchecked Sendable {  // immutable; holds C function pointers only
    typealias Handle = OpaquePointer

    let easyInit: @convention(c) () -> Handle?
    let easyCleanup: @convention(c) (Handle?) -> Void
    let easyReset: @convention(c) (Handle?) -> Void
    let easySetoptLong: @convention(c) (Handle?, Int32, Int) -> Int32
    let easySetoptPointer: @convention(c) (Handle?, Int32, UnsafeRawPointer?) -> Int32
    let easyGetinfo: @convention(c) (Handle?, Int32, UnsafeMutableRawPointer?) -> Int32
    let easyStrerror: @convention(c) (Int32) -> UnsafePointer<CChar>?
    let slistAppend: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?) -> UnsafeMutableRawPointer?
    let slistFreeAll: @convention(c) (UnsafeMutableRawPointer?) -> Void
    let multiInit: @convention(c) () -> Handle?
    let multiCleanup: @convention(c) (Handle?) -> Int32
    let multiSetoptLong: @convention(c) (Handle?, Int32, Int) -> Int32
    let multiAddHandle: @convention(c) (Handle?, Handle?) -> Int32
    let multiRemoveHandle: @convention(c) (Handle?, Handle?) -> Int32
    let multiPerform: @convention(c) (Handle?, UnsafeMutablePointer<Int32>?) -> Int32
    let multiPoll: @convention(c) (Handle?, UnsafeMutableRawPointer?, UInt32, Int32, UnsafeMutablePointer<Int32>?) -> Int32
    let multiWakeup: @convention(c) (Handle?) -> Int32
    let multiInfoRead: @convention(c) (Handle?, UnsafeMutablePointer<Int32>?) -> UnsafeMutableRawPointer?
    /// `curl_easy_pause`: 0 (`CURLPAUSE_CONT`) goes on with a transfer paused by its write callback.
    let easyPause: @convention(c) (Handle?, Int32) -> Int32
    /// libcurl's version, e.g. "7.88.1".
    let version: String
    /// `curl_version_info`, for what `CurlVersion` reports.
    let versionInfo: @convention(c) (Int32) -> UnsafeRawPointer?

    /// libcurl as this process can load it, or why it cannot.
    static let shared: Result<CurlLibrary, CurlUnavailable> = load()

    private static func load() -> Result<CurlLibrary, CurlUnavailable> {
        var library: UnsafeMutableRawPointer?
        for name in ["libcurl.so.4", "libcurl.so"] {
            library = dlopen(name, RTLD_NOW | RTLD_LOCAL)
            if library != nil { break }
        }
        guard let library else {
            return .failure(CurlUnavailable(reason: "libcurl.so.4 could not be loaded: \(String(cString: dlerror()))"))
        }
        var missing: [String] = []
        func symbol<F>(_ name: String, as type: F.Type) -> F? {
            guard let address = dlsym(library, name) else {
                missing.append(name)
                return nil
            }
            return unsafeBitCast(address, to: type)
        }
        typealias VersionInfo = @convention(c) (Int32) -> UnsafeRawPointer?
        typealias GlobalInit = @convention(c) (Int) -> Int32
        let globalInit = symbol("curl_global_init", as: GlobalInit.self)
        let versionInfo = symbol("curl_version_info", as: VersionInfo.self)
        guard
            let globalInit, let versionInfo,
            let easyInit = symbol("curl_easy_init", as: (@convention(c) () -> Handle?).self),
            let easyCleanup = symbol("curl_easy_cleanup", as: (@convention(c) (Handle?) -> Void).self),
            let easyReset = symbol("curl_easy_reset", as: (@convention(c) (Handle?) -> Void).self),
            let easySetoptLong = symbol("curl_easy_setopt", as: (@convention(c) (Handle?, Int32, Int) -> Int32).self),
            let easySetoptPointer = symbol("curl_easy_setopt", as: (@convention(c) (Handle?, Int32, UnsafeRawPointer?) -> Int32).self),
            let easyGetinfo = symbol("curl_easy_getinfo", as: (@convention(c) (Handle?, Int32, UnsafeMutableRawPointer?) -> Int32).self),
            let easyStrerror = symbol("curl_easy_strerror", as: (@convention(c) (Int32) -> UnsafePointer<CChar>?).self),
            let slistAppend = symbol("curl_slist_append", as: (@convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?) -> UnsafeMutableRawPointer?).self),
            let slistFreeAll = symbol("curl_slist_free_all", as: (@convention(c) (UnsafeMutableRawPointer?) -> Void).self),
            let multiInit = symbol("curl_multi_init", as: (@convention(c) () -> Handle?).self),
            let multiCleanup = symbol("curl_multi_cleanup", as: (@convention(c) (Handle?) -> Int32).self),
            let multiSetoptLong = symbol("curl_multi_setopt", as: (@convention(c) (Handle?, Int32, Int) -> Int32).self),
            let multiAddHandle = symbol("curl_multi_add_handle", as: (@convention(c) (Handle?, Handle?) -> Int32).self),
            let multiRemoveHandle = symbol("curl_multi_remove_handle", as: (@convention(c) (Handle?, Handle?) -> Int32).self),
            let multiPerform = symbol("curl_multi_perform", as: (@convention(c) (Handle?, UnsafeMutablePointer<Int32>?) -> Int32).self),
            let multiPoll = symbol("curl_multi_poll", as: (@convention(c) (Handle?, UnsafeMutableRawPointer?, UInt32, Int32, UnsafeMutablePointer<Int32>?) -> Int32).self),
            let multiWakeup = symbol("curl_multi_wakeup", as: (@convention(c) (Handle?) -> Int32).self),
            let multiInfoRead = symbol("curl_multi_info_read", as: (@convention(c) (Handle?, UnsafeMutablePointer<Int32>?) -> UnsafeMutableRawPointer?).self),
            let easyPause = symbol("curl_easy_pause", as: (@convention(c) (Handle?, Int32) -> Int32).self)
        else {
            // curl_multi_poll and curl_multi_wakeup arrived in libcurl 7.66 and 7.68.
            return .failure(CurlUnavailable(reason: "the loaded libcurl lacks \(missing.joined(separator: ", ")) (libcurl 7.68 or later is needed)"))
        }
        // curl_version_info(CURLVERSION_NOW): { int age; const char *version; unsigned int version_num; … }
        var version = "?"
        if let info = versionInfo(Curl.versionNow) {
            let text = info.load(fromByteOffset: MemoryLayout<Int>.size, as: UnsafePointer<CChar>?.self)
            let number = info.load(fromByteOffset: 2 * MemoryLayout<Int>.size, as: UInt32.self)
            if let text { version = String(cString: text) }
            // 7.68.0: curl_multi_wakeup. 7.85.0: CURLOPT_PROTOCOLS_STR (older ones take a bit mask).
            if number < 0x07_44_00 {
                return .failure(CurlUnavailable(reason: "libcurl \(version) is too old (7.68 or later is needed)"))
            }
        }
        // Reference-counted, so harmless next to FoundationNetworking's own call.
        let code = globalInit(Curl.globalAll)
        guard code == 0 else { return .failure(CurlUnavailable(reason: "curl_global_init failed (\(code))")) }
        return .success(CurlLibrary(
            easyInit: easyInit, easyCleanup: easyCleanup, easyReset: easyReset, easySetoptLong: easySetoptLong,
            easySetoptPointer: easySetoptPointer, easyGetinfo: easyGetinfo, easyStrerror: easyStrerror,
            slistAppend: slistAppend, slistFreeAll: slistFreeAll, multiInit: multiInit,
            multiCleanup: multiCleanup, multiSetoptLong: multiSetoptLong, multiAddHandle: multiAddHandle,
            multiRemoveHandle: multiRemoveHandle, multiPerform: multiPerform, multiPoll: multiPoll,
            multiWakeup: multiWakeup, multiInfoRead: multiInfoRead, easyPause: easyPause, version: version, versionInfo: versionInfo))
    }

    /// libcurl's words for a result code.
    func describe(_ code: Int32) -> String {
        easyStrerror(code).map { String(cString: $0) } ?? "curl error \(code)"
    }
}

/// libcurl cannot be used in this process.
package struct CurlUnavailable: Error, Sendable, CustomStringConvertible {
    package var reason: String
    package var description: String { "the curl HTTP client is unavailable: \(reason)" }
}

/// The numbers of libcurl's C API that this client uses (curl/curl.h, curl/multi.h); they are
/// part of libcurl's stable ABI.
enum Curl {
    static let versionNow: Int32 = 0  // CURLVERSION_FIRST: the fields read exist at every age
    static let globalAll = 3  // CURL_GLOBAL_ALL
    /// `CURL_WRITEFUNC_PAUSE`: a write callback's answer that pauses the transfer, the piece held.
    static let writePause = 0x1000_0001

    // Option kinds: CURLOPTTYPE_LONG 0, OBJECTPOINT 10000, FUNCTIONPOINT 20000.
    enum Option {
        static let writeData: Int32 = 10_001
        static let url: Int32 = 10_002
        static let errorBuffer: Int32 = 10_010
        static let writeFunction: Int32 = 20_011
        static let userAgent: Int32 = 10_018
        static let lowSpeedLimit: Int32 = 19
        static let lowSpeedTime: Int32 = 20
        static let httpHeader: Int32 = 10_023
        static let headerData: Int32 = 10_029
        static let headerFunction: Int32 = 20_079
        static let noSignal: Int32 = 99
        static let bufferSize: Int32 = 98
        static let acceptEncoding: Int32 = 10_102
        static let tcpKeepAlive: Int32 = 213
        static let protocols: Int32 = 181  // bit mask, before 7.85
        static let openSocketFunction: Int32 = 20_163
        static let openSocketData: Int32 = 10_164
        static let prereqFunction: Int32 = 20_312  // 7.80
        static let prereqData: Int32 = 10_313
        static let protocolsString: Int32 = 10_318
        static let sslCert: Int32 = 10_025
        static let caInfo: Int32 = 10_065
        static let sslKey: Int32 = 10_087
        static let caPath: Int32 = 10_097
    }

    enum MultiOption {
        static let maxConnects: Int32 = 6
        static let maxHostConnections: Int32 = 7
        static let maxTotalConnections: Int32 = 13
    }

    static let protocolHTTP = 1 << 0
    static let protocolHTTPS = 1 << 1
    static let messageDone: Int32 = 1  // CURLMSG_DONE
    static let socketBad: Int32 = -1  // CURL_SOCKET_BAD
    static let socketTypeConnection: Int32 = 0  // CURLSOCKTYPE_IPCXN
    static let prereqOK: Int32 = 0  // CURL_PREREQFUNC_OK
    static let prereqAbort: Int32 = 1  // CURL_PREREQFUNC_ABORT
    static let errorSize = 256  // CURL_ERROR_SIZE

    /// CURLcode values the client tells apart.
    enum Code {
        static let ok: Int32 = 0
        static let unsupportedProtocol: Int32 = 1
        static let urlMalformat: Int32 = 3
        static let couldNotResolveProxy: Int32 = 5
        static let couldNotResolveHost: Int32 = 6
        static let couldNotConnect: Int32 = 7
        static let weirdServerReply: Int32 = 8
        static let http2: Int32 = 16
        static let partialFile: Int32 = 18
        static let writeError: Int32 = 23
        static let operationTimedOut: Int32 = 28
        static let abortedByCallback: Int32 = 42
        static let tooManyRedirects: Int32 = 47
        static let gotNothing: Int32 = 52
        static let sendError: Int32 = 55
        static let recvError: Int32 = 56
        static let badContentEncoding: Int32 = 61
        static let http2Stream: Int32 = 92
        static let unknownOption: Int32 = 48
        static let sslConnectError: Int32 = 35
        static let sslCertProblem: Int32 = 58
        static let peerFailedVerification: Int32 = 60
        static let sslCACertBadFile: Int32 = 77
    }
}
