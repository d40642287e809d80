import Foundation
import RunnerKit
import Testing

/// The address policy's rules on their own: classification, patterns, and the checks the HTTP
/// clients make, with a resolver handed in instead of DNS.
@Suite struct AddressPolicyTests {
    static func address(_ text: String) -> NetworkAddress { NetworkAddress(text)! }

    @Test(arguments: [
        ("0.0.0.0", NetworkAddress.Scope.unspecified), ("0.1.2.3", .unspecified), ("::", .unspecified),
        ("169.254.169.254", .linkLocal), ("169.254.0.1", .linkLocal), ("fe80::1", .linkLocal), ("febf::1", .linkLocal),
        ("127.0.0.1", .loopback), ("127.255.0.9", .loopback), ("::1", .loopback),
        ("10.1.2.3", .privateNetwork), ("172.16.0.1", .privateNetwork), ("172.31.255.255", .privateNetwork),
        ("192.168.1.1", .privateNetwork), ("100.64.0.1", .privateNetwork), ("100.127.255.254", .privateNetwork),
        ("fc00::1", .privateNetwork), ("fd12:3456::1", .privateNetwork),
        ("::ffff:169.254.169.254", .linkLocal), ("::ffff:10.0.0.1", .privateNetwork), ("::ffff:127.0.0.1", .loopback),
        ("203.0.113.7", .publicNetwork), ("172.32.0.1", .publicNetwork), ("100.128.0.1", .publicNetwork),
        ("169.255.0.1", .publicNetwork), ("8.8.8.8", .publicNetwork), ("2001:db8::1", .publicNetwork), ("fec0::1", .publicNetwork),
    ])
    func addressesAreClassified(text: String, scope: NetworkAddress.Scope) {
        #expect(Self.address(text).scope == scope, "\(text)")
    }

    @Test func addressesReadAndPrint() {
        #expect(Self.address("[fe80::1]").description == "fe80::1")
        #expect(Self.address("fe80::1%eth0").description == "fe80::1")
        #expect(Self.address("::ffff:10.0.0.1").description == "10.0.0.1")
        #expect(Self.address("::ffff:10.0.0.1") == Self.address("10.0.0.1"))
        #expect(NetworkAddress("metadata.google.internal") == nil)
        #expect(NetworkAddress("1.2.3") == nil)
    }

    @Test func patternsAreReadAndMatch() throws {
        let block = try HostPattern(parsing: "10.0.0.0/8")
        #expect(block.matches(host: "x", address: Self.address("10.200.0.1")))
        #expect(!block.matches(host: "x", address: Self.address("11.0.0.1")))
        #expect(block.matches(host: "x", address: Self.address("::ffff:10.0.0.1")))
        let v6 = try HostPattern(parsing: "fd00::/8")
        #expect(v6.matches(host: "x", address: Self.address("fd12::1")))
        #expect(!v6.matches(host: "x", address: Self.address("fc12::1")))
        let one = try HostPattern(parsing: "169.254.169.254")
        #expect(one == .network(Self.address("169.254.169.254"), prefixLength: 32))
        #expect(one.matches(host: "metadata", address: Self.address("169.254.169.254")))
        #expect(!one.matches(host: "metadata", address: Self.address("169.254.169.253")))
        let name = try HostPattern(parsing: "API.Example.org.")
        #expect(name.matches(host: "api.example.org", address: Self.address("10.0.0.1")))
        #expect(!name.matches(host: "www.example.org", address: nil))
        let suffix = try HostPattern(parsing: "*.example.org")
        #expect(suffix.matches(host: "a.b.example.org", address: nil))
        #expect(!suffix.matches(host: "example.org", address: nil))
        #expect(!suffix.matches(host: "badexample.org", address: nil))
        #expect(try HostPattern(parsing: "0.0.0.0/0").matches(host: "x", address: Self.address("8.8.8.8")))
        for bad in ["", "10.0.0.0/33", "fd00::/129", "host/8", "exa mple.org", "*.", "a..b", "10.0.0.0/x"] {
            #expect(throws: HostPattern.Invalid.self, "\(bad)") { try HostPattern(parsing: bad) }
        }
    }

    @Test func theStandardPolicyRefusesLinkLocalAndUnspecifiedOnly() {
        let policy = AddressPolicy.standard
        let metadata = policy.refusal(host: "169.254.169.254", address: Self.address("169.254.169.254"))
        #expect(metadata?.description == "refused to connect to 169.254.169.254: a link-local address, refused unless allowed with --allow-host")
        let named = policy.refusal(host: "metadata.internal", address: Self.address("fe80::a"))
        #expect(named?.description.contains("metadata.internal (fe80::a)") == true)
        #expect(policy.refusal(host: "0.0.0.0", address: Self.address("0.0.0.0"))?.description.contains("unspecified") == true)
        #expect(policy.refusal(host: "localhost", address: Self.address("127.0.0.1")) == nil)
        #expect(policy.refusal(host: "nas", address: Self.address("192.168.1.2")) == nil)
        #expect(policy.refusal(host: "example.org", address: Self.address("203.0.113.7")) == nil)
    }

    @Test func denyPrivateRefusesLoopbackAndPrivateRanges() {
        let policy = AddressPolicy(denyPrivate: true)
        for text in ["127.0.0.1", "::1", "10.0.0.1", "172.20.0.1", "192.168.0.1", "100.64.1.1", "fd00::1"] {
            let refusal = policy.refusal(host: "h", address: Self.address(text))
            #expect(refusal?.description.hasSuffix("refused by --deny-private") == true, "\(text)")
        }
        #expect(policy.refusal(host: "h", address: Self.address("203.0.113.7")) == nil)
        #expect(policy.refusal(host: "h", address: Self.address("169.254.1.1"))?.description.contains("--allow-host") == true)
    }

    @Test func anAllowListLetsOnlyWhatItNamesThroughWhateverTheAddress() throws {
        let policy = AddressPolicy(denyPrivate: true, allowedHosts: [
            try HostPattern(parsing: "169.254.169.254"), try HostPattern(parsing: "*.corp.example"), try HostPattern(parsing: "10.1.0.0/16"),
        ])
        #expect(policy.refusal(host: "169.254.169.254", address: Self.address("169.254.169.254")) == nil)
        #expect(policy.refusal(host: "db.corp.example", address: Self.address("192.168.3.3")) == nil)
        #expect(policy.refusal(host: "anything", address: Self.address("10.1.2.3")) == nil)
        let other = policy.refusal(host: "example.org", address: Self.address("203.0.113.7"))
        #expect(other?.description == "refused to connect to example.org (203.0.113.7): not matched by any --allow-host")
        #expect(policy.refusal(host: "169.254.169.253", address: Self.address("169.254.169.253")) != nil)
    }

    @Test func aRedirectFromPublicToPrivateIsRefusedUnlessNamed() throws {
        let policy = AddressPolicy.standard
        let publicServer = Self.address("203.0.113.7")
        for text in ["10.0.0.1", "127.0.0.1", "192.168.1.1", "fd00::2"] {
            let refusal = policy.refusal(host: "internal", address: Self.address(text), after: publicServer)
            #expect(refusal?.description.hasPrefix("refused a redirect from a public address (203.0.113.7) to a ") == true, "\(text)")
        }
        #expect(policy.refusal(host: "b", address: Self.address("198.51.100.1"), after: publicServer) == nil)
        #expect(policy.refusal(host: "b", address: Self.address("10.0.0.2"), after: Self.address("10.0.0.1")) == nil)
        #expect(policy.refusal(host: "b", address: Self.address("203.0.113.9"), after: Self.address("127.0.0.1")) == nil)
        let named = AddressPolicy(allowedHosts: [try HostPattern(parsing: "internal"), try HostPattern(parsing: "example.org")])
        #expect(named.refusal(host: "internal", address: Self.address("10.0.0.1"), after: publicServer) == nil)
    }

    @Test func redirectsMayNotDropTLSNorLeaveHTTP() {
        let policy = AddressPolicy.standard
        let https = URL(string: "https://example.org/a")!
        #expect(policy.refusal(redirectFrom: https, to: URL(string: "https://other.example/b")!) == nil)
        #expect(policy.refusal(redirectFrom: URL(string: "http://example.org/a")!, to: https) == nil)
        #expect(policy.refusal(redirectFrom: URL(string: "http://example.org/a")!, to: URL(string: "http://x/")!) == nil)
        let downgrade = policy.refusal(redirectFrom: https, to: URL(string: "http://example.org/a")!)
        #expect(downgrade?.description == "refused a redirect from https to http ('http://example.org/a'): a redirect may not drop TLS")
        #expect(policy.refusal(redirectFrom: https, to: URL(string: "file:///etc/passwd")!) != nil)
    }

    @Test func aResolvedNameIsJudgedByEveryAddressItGives() {
        let answers: [String: [NetworkAddress]] = [
            "rebind.example": [Self.address("203.0.113.7"), Self.address("169.254.169.254")],
            "public.example": [Self.address("203.0.113.8")],
            "internal.example": [Self.address("10.0.0.5")],
        ]
        let resolver: AddressPolicy.Resolver = { answers[$0] ?? [] }
        let policy = AddressPolicy.standard
        let (mixed, addresses) = policy.refusal(url: URL(string: "http://rebind.example/x")!, resolver: resolver)
        #expect(mixed?.description.contains("rebind.example (169.254.169.254): a link-local address") == true)
        #expect(addresses.count == 2)
        #expect(policy.refusal(url: URL(string: "http://public.example/x")!, resolver: resolver).0 == nil)
        #expect(policy.refusal(url: URL(string: "http://nowhere.example/x")!, resolver: resolver).0 == nil)  // the client says it cannot resolve
        #expect(policy.refusal(url: URL(string: "http://169.254.169.254/latest")!, resolver: { _ in [] }).0 != nil)  // a literal is not resolved
        let redirect = policy.refusal(url: URL(string: "http://internal.example/")!, after: [Self.address("203.0.113.8")], resolver: resolver)
        #expect(redirect.0?.description.contains("from a public address") == true)
    }
}
