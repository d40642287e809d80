// swift-tools-version: 6.0
import PackageDescription

// A service that embeds the runner's engine, as an adopter's package would: it depends on the
// runner's package (here by path, from this checkout) and uses only its public products.
let package = Package(
    name: "FeedService",
    dependencies: [
        .package(name: "runner", path: "../.."),
    ],
    targets: [
        .executableTarget(
            name: "FeedService",
            dependencies: [
                .product(name: "RunnerKit", package: "runner"),
                .product(name: "RunnerKinds", package: "runner"),
                .product(name: "FixtureServer", package: "runner"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny"), .enableUpcomingFeature("MemberImportVisibility")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
