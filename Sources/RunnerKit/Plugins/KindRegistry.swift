/// Maps kind names to the types that decode and run them.
public struct KindRegistry: Sendable {
    /// Registering a name twice is a programming error that the registry refuses.
    public struct DuplicateKind: Error, CustomStringConvertible {
        public var name: String
        public var description: String { "A job kind named '\(name)' is already registered." }
    }

    private var kinds: [String: any JobKind.Type] = [:]
    private var order: [String] = []

    public init() {}

    public init(_ types: [any JobKind.Type]) throws {
        for type in types { try register(type) }
    }

    public mutating func register(_ type: any JobKind.Type) throws {
        guard kinds[type.name] == nil else { throw DuplicateKind(name: type.name) }
        kinds[type.name] = type
        order.append(type.name)
    }

    public func kind(named name: String) -> (any JobKind.Type)? { kinds[name] }

    /// The registered kinds, in registration order.
    public var all: [any JobKind.Type] { order.compactMap { kinds[$0] } }

    public var names: [String] { order }
}
