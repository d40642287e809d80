print("runner")
