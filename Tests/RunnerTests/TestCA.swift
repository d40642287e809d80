import Foundation

/// A certificate authority made at test time with the system's `openssl`, in a folder of the
/// test's own: trusted by nothing on the machine, so only a client told about its certificate
/// accepts what it signs. Keys are P-256 (fast to make); certificates last two days.
///
/// ```swift
/// let ca = try await TestCA(name: "ca", commonName: "runner test CA", in: folder)
/// let server = try await ca.issue("server", commonName: "localhost", use: .server(names: ["localhost"], addresses: ["127.0.0.1"]))
/// ```
struct TestCA {
    /// A certificate and its private key, both PEM files.
    struct Issued {
        var certificate: String
        var key: String
    }

    /// What a leaf certificate is for: its extended key usage, and for a server its names.
    enum Use {
        case server(names: [String], addresses: [String])
        case client
    }

    /// The CA's own certificate (PEM): the file a client trusts.
    let certificate: String
    let key: String
    let folder: String

    /// Makes the CA's key and self-signed certificate as `<name>.pem` and `<name>.key` in `folder`.
    init(name: String, commonName: String, in folder: String) async throws {
        self.folder = folder
        certificate = "\(folder)/\(name).pem"
        key = "\(folder)/\(name).key"
        try await Self.makeKey(key)
        try await Self.openssl([
            "req", "-x509", "-new", "-key", key, "-out", certificate, "-days", "2", "-subj", "/CN=\(commonName)",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        ])
    }

    /// Makes a key and a certificate for it signed by this CA, as `<name>.pem` and `<name>.key`.
    func issue(_ name: String, commonName: String, use: Use) async throws -> Issued {
        let issued = Issued(certificate: "\(folder)/\(name).pem", key: "\(folder)/\(name).key")
        let request = "\(folder)/\(name).csr"
        let extensions = "\(folder)/\(name).ext"
        try await Self.makeKey(issued.key)
        try await Self.openssl(["req", "-new", "-key", issued.key, "-out", request, "-subj", "/CN=\(commonName)"])
        var lines = ["basicConstraints=critical,CA:FALSE", "keyUsage=critical,digitalSignature"]
        switch use {
        case .server(let names, let addresses):
            lines.append("extendedKeyUsage=serverAuth")
            lines.append("subjectAltName=" + (names.map { "DNS:\($0)" } + addresses.map { "IP:\($0)" }).joined(separator: ","))
        case .client:
            lines.append("extendedKeyUsage=clientAuth")
        }
        try (lines.joined(separator: "\n") + "\n").write(toFile: extensions, atomically: true, encoding: .utf8)
        let serial = String(UInt64.random(in: 1...(UInt64.max >> 1)), radix: 16)
        try await Self.openssl([
            "x509", "-req", "-in", request, "-CA", certificate, "-CAkey", key, "-set_serial", "0x\(serial)",
            "-days", "2", "-out", issued.certificate, "-extfile", extensions,
        ])
        return issued
    }

    private static func makeKey(_ path: String) async throws {
        try await openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path])
    }

    private static func openssl(_ arguments: [String]) async throws {
        let result = try await SystemTool.run("openssl", arguments)
        guard result.status == 0 else {
            throw Failed(description: "openssl \(arguments.joined(separator: " ")) exited with \(result.status): \(result.output)")
        }
    }

    struct Failed: Error, CustomStringConvertible { var description: String }
}
