"""Asks for input, as an interactive script would."""
name = input("experiment name: ")
print("running", name)
