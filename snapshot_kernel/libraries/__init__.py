"""Copy support for the libraries users keep in states (numpy, pandas, matplotlib):
each module registers its handlers and is imported the first time a type of its library is met."""
